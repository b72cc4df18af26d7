package app

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
)

// A volume taking snapshots one after another has each Snapshot object
// ready from the engine itself at once, while its Engine status, whose
// snapshot list grows with them, writes the list at most once per list
// pace: the second snapshot shows there when that pace ends, not before.
func TestTheEngineStatusListsSnapshotsAtItsOwnPace(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1}`).expect(t, 200)
	e.waitVolume(t, "vol", "created", func(m map[string]interface{}) bool { return m["state"] == "detached" })
	e.call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1","disableFrontend":true}`).expect(t, 200)
	e.waitVolume(t, "vol", "attached", func(m map[string]interface{}) bool { return m["state"] == "attached" })

	listed := func(name string) (bool, error) {
		eng, err := e.lh.LonghornV1beta2().Engines(e.ns).Get(context.Background(), datastore.EngineName("vol"), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return eng.Status.Snapshots[name] != nil, nil
	}
	// The first change of the list alone is mirrored as any change.
	e.createSnapshotObject(t, "vol", "first")
	eventually(t, 20*time.Second, "the Engine status listing the first snapshot", func() (bool, error) { return listed("first") })
	listedFirst := time.Now()

	e.createSnapshotObject(t, "vol", "second")
	s, err := e.snapshotObject(t, "second")
	if err != nil {
		t.Fatal(err)
	}
	if s.Status.Parent != "first" || !s.Status.Children["volume-head"] {
		t.Fatalf("second's status %+v, want the engine's entry: parent first, child volume-head", s.Status)
	}
	eventually(t, 20*time.Second, "first's object listing its child second", func() (bool, error) {
		f, err := e.snapshotObject(t, "first")
		return err == nil && f.Status.Children["second"] && !f.Status.Children["volume-head"], nil
	})
	if ok, err := listed("second"); err != nil || (ok && time.Since(listedFirst) < 25*time.Second) {
		t.Fatalf("the Engine status listed the second snapshot %s after the first (%v), within the list pace", time.Since(listedFirst).Round(time.Second), err)
	}
	eventually(t, 60*time.Second, "the Engine status listing the second snapshot", func() (bool, error) { return listed("second") })
}
