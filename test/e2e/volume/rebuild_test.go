//go:build e2e

package volume

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/app"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// A volume of two replicas on two of three nodes, attached on one of
// them, with a snapshot: the other replica's node is stopped, and writes
// go on (the engine drops that replica, marked failed). A new replica is
// placed on the third node, in its place, and rebuilt into the running
// engine while it is in use; it joins RW, the volume healthy again. Then
// the engine's node is stopped too, and the volume attached on the third
// node alone reads every block written, before and after the loss, and
// its chain has the snapshot from before it.
func TestALostReplicaIsRebuiltOnAnotherNode(t *testing.T) {
	t.Parallel()
	now := func(o *app.DaemonOptions) {
		o.DefaultSettings[types.SettingNameReplicaReplenishmentWaitInterval] = "0"
	}
	n := startNodes(t, 3, now)
	e, lh, ns, ctx := n.api, n.lh, n.ns, context.Background()
	replicas := n.spreadVolume(t, "vol", 2)
	engineNode, lostNode := replicas[0].Spec.NodeID, replicas[1].Spec.NodeID
	if replicas[0].Name != "vol-r-0" {
		engineNode, lostNode = lostNode, engineNode
	}
	spare := ""
	for _, node := range []string{"node-1", "node-2", "node-3"} {
		if node != engineNode && node != lostNode {
			spare = node
		}
	}
	// The API of a node that stays up.
	api := &framework.APIEnv{ManagerEnv: e.ManagerEnv, Base: "http://" + n.daemons[spare].APIAddress}

	api.Call(t, "POST", "/v1/volumes/vol?action=attach", fmt.Sprintf(`{"hostId":%q}`, engineNode)).Expect(t, 200)
	v := api.WaitVolume(t, "vol", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	endpoint := v["endpoint"].(string)
	want := make([]byte, 4<<20)
	framework.QemuIO(t, endpoint, "write -P 0x21 0 1M", "flush")
	copy(want, bytes.Repeat([]byte{0x21}, 1<<20))
	api.Call(t, "POST", "/v1/volumes/vol?action=snapshotCreate", `{"name":"before"}`).Expect(t, 200)
	framework.QemuIO(t, endpoint, "write -P 0x22 1M 1M", "flush")
	copy(want[1<<20:], bytes.Repeat([]byte{0x22}, 1<<20))

	// The other replica's node lost: the writes go on, on one replica.
	n.daemons[lostNode].Stop(t)
	framework.QemuIO(t, endpoint, "write -P 0x23 2M 512k", "flush")
	copy(want[2<<20:], bytes.Repeat([]byte{0x23}, 512<<10))

	var rebuilt string
	framework.Eventually(t, 120*time.Second, "a replica rebuilt on "+spare+" in place of the lost one, RW", func() (bool, error) {
		list, err := lh.LonghornV1beta2().Replicas(ns).List(ctx, metav1.ListOptions{LabelSelector: types.LabelVolume + "=vol"})
		if err != nil {
			return false, err
		}
		eng, err := lh.LonghornV1beta2().Engines(ns).Get(ctx, "vol-e-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, r := range list.Items {
			if r.Spec.NodeID == spare && r.Spec.HealthyAt != "" && eng.Status.ReplicaModeMap[r.Name] == longhorn.ReplicaModeRW {
				rebuilt = r.Name
				return true, nil
			}
		}
		return false, nil
	})
	framework.QemuIO(t, endpoint, "write -P 0x24 3M 512k", "flush")
	copy(want[3<<20:], bytes.Repeat([]byte{0x24}, 512<<10))
	api.WaitVolume(t, "vol", "healthy again", func(v map[string]any) bool { return v["robustness"] == "healthy" })
	got := api.Call(t, "GET", "/v1/volumes/vol", "").Expect(t, 200)
	if !strings.Contains(got.Raw, `"replica":"`+rebuilt+`"`) || !strings.Contains(got.Raw, `"state":"complete"`) {
		t.Errorf("the volume's rebuildStatus does not show %s's rebuild complete: %s", rebuilt, got.Raw)
	}
	if got := framework.DeviceContent(t, endpoint); !bytes.Equal(got, want) {
		t.Fatal("the volume does not read what was written")
	}
	api.Call(t, "POST", "/v1/volumes/vol?action=detach", "").Expect(t, 200)
	api.WaitVolume(t, "vol", "detached", func(v map[string]any) bool { return v["state"] == "detached" })

	// The rebuilt replica alone: the engine's node stopped, attached on
	// the spare node, which holds it.
	n.daemons[engineNode].Stop(t)
	framework.Eventually(t, 60*time.Second, engineNode+" down", func() (bool, error) {
		got, err := lh.LonghornV1beta2().Nodes(ns).Get(ctx, engineNode, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == longhorn.ConditionTypeReady {
				return c.Status == longhorn.ConditionStatusFalse, nil
			}
		}
		return false, nil
	})
	api.Call(t, "POST", "/v1/volumes/vol?action=attach", fmt.Sprintf(`{"hostId":%q}`, spare)).Expect(t, 200)
	v = api.WaitVolume(t, "vol", "attached on "+spare+" on the rebuilt replica", func(v map[string]any) bool {
		return v["state"] == "attached" && v["currentNodeID"] == spare && v["endpoint"] != ""
	})
	if got := framework.DeviceContent(t, v["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Fatal("the rebuilt replica does not hold every block written, before and after the loss")
	}
	framework.Eventually(t, 20*time.Second, "the snapshot from before the loss in the rebuilt replica's chain", func() (bool, error) {
		eng, err := lh.LonghornV1beta2().Engines(ns).Get(ctx, "vol-e-0", metav1.GetOptions{})
		return err == nil && eng.Status.Snapshots["before"] != nil, err
	})
}
