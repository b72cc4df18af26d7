//go:build e2e

package volume

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// A volume taking snapshots one after another has each Snapshot object
// ready from the engine itself at once, while its Engine status, whose
// snapshot list grows with them, writes the list at most once per list
// pace: the attach's write lists the volume head, so a snapshot taken
// right after it shows there when that pace ends, not before, and so does
// the next one after that.
func TestTheEngineStatusListsSnapshotsAtItsOwnPace(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1","disableFrontend":true}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "attached", func(m map[string]any) bool { return m["state"] == "attached" })
	attached := time.Now()

	listed := func(name string) (bool, error) {
		eng, err := e.LH.LonghornV1beta2().Engines(e.NS).Get(context.Background(), datastore.EngineName("vol"), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return eng.Status.Snapshots[name] != nil, nil
	}
	// notBefore fails when name is listed within most of a list pace of
	// since, then waits for it to be listed and tells when it was seen.
	notBefore := func(name string, since time.Time) time.Time {
		t.Helper()
		for time.Since(since) < 25*time.Second {
			if ok, err := listed(name); err != nil || ok {
				t.Fatalf("the Engine status listed %s %s after the last list (%v), within the list pace", name, time.Since(since).Round(time.Second), err)
			}
			time.Sleep(500 * time.Millisecond)
		}
		framework.Eventually(t, 60*time.Second, "the Engine status listing "+name, func() (bool, error) { return listed(name) })
		return time.Now()
	}

	e.CreateSnapshotObject(t, "vol", "first")
	listedFirst := notBefore("first", attached)

	e.CreateSnapshotObject(t, "vol", "second")
	s, err := e.SnapshotObject(t, "second")
	if err != nil {
		t.Fatal(err)
	}
	if s.Status.Parent != "first" || !s.Status.Children["volume-head"] {
		t.Fatalf("second's status %+v, want the engine's entry: parent first, child volume-head", s.Status)
	}
	framework.Eventually(t, 20*time.Second, "first's object listing its child second", func() (bool, error) {
		f, err := e.SnapshotObject(t, "first")
		return err == nil && f.Status.Children["second"] && !f.Status.Children["volume-head"], nil
	})
	notBefore("second", listedFirst)
}
