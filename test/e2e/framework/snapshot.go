package framework

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

const testHoldFinalizer = "test.longhorn.io/hold"

// CreateSnapshotObject applies a Snapshot object with createSnapshot true
// and waits until it is ready to use.
func (e *APIEnv) CreateSnapshotObject(t *testing.T, volume, name string) {
	t.Helper()
	e.Cluster.Kubectl(t, `apiVersion: longhorn.io/v1beta2
kind: Snapshot
metadata:
  name: `+name+`
spec:
  volume: `+volume+`
  createSnapshot: true
`, "-n", e.NS, "apply", "-f", "-")
	Eventually(t, 20*time.Second, name+" ready to use", func() (bool, error) {
		s, err := e.SnapshotObject(t, name)
		return err == nil && s.Status.ReadyToUse && e.EngineSnapshot(t, volume, name) != nil, nil
	})
}

// SetHold adds or removes a finalizer of the test's own, which keeps a
// deleted object visible after the manager has released its own.
func (e *APIEnv) SetHold(t *testing.T, name string, on bool) {
	t.Helper()
	// The patch carries the resource version, so it never drops a
	// finalizer the controller added meanwhile; the controller writes the
	// object too (its status), so a conflict is read again and retried.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := e.SnapshotObject(t, name)
		if err != nil {
			return err
		}
		var fins []string
		for _, f := range s.Finalizers {
			if f != testHoldFinalizer {
				fins = append(fins, f)
			}
		}
		if on {
			fins = append(fins, testHoldFinalizer)
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"finalizers": fins, "resourceVersion": s.ResourceVersion,
		}})
		_, err = e.LH.LonghornV1beta2().Snapshots(e.NS).Patch(context.Background(), name, k8stypes.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// JobSnapshotObjects lists the Snapshot objects a recurring job's runs
// made on a volume, by their status labels.
func (e *APIEnv) JobSnapshotObjects(t *testing.T, volume, job string) []longhorn.Snapshot {
	t.Helper()
	list, err := e.LH.LonghornV1beta2().Snapshots(e.NS).List(context.Background(), metav1.ListOptions{LabelSelector: "longhornvolume=" + volume})
	if err != nil {
		t.Fatal(err)
	}
	var out []longhorn.Snapshot
	for _, s := range list.Items {
		if s.Status.Labels["RecurringJob"] == job {
			out = append(out, s)
		}
	}
	return out
}

func (e *APIEnv) AttachedVolume(t *testing.T, name string) {
	t.Helper()
	e.Call(t, "POST", "/v1/volumes", `{"name":"`+name+`","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.WaitVolume(t, name, "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/"+name+"?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	e.WaitVolume(t, name, "attached", func(m map[string]any) bool { return m["state"] == "attached" })
}

func (e *APIEnv) SnapshotObject(t *testing.T, name string) (*longhorn.Snapshot, error) {
	t.Helper()
	return e.LH.LonghornV1beta2().Snapshots(e.NS).Get(context.Background(), name, metav1.GetOptions{})
}

// EngineSnapshot is the entry of a snapshot in the volume's engine, read
// from the engine through the API's snapshotGet (nil when the engine has
// none or the volume is not attached). The Engine object's status lists
// the same entries, its list mirrored at a pace of its own.
func (e *APIEnv) EngineSnapshot(t *testing.T, volume, name string) *longhorn.SnapshotInfo {
	t.Helper()
	resp := e.Call(t, "POST", "/v1/volumes/"+volume+"?action=snapshotGet", `{"name":"`+name+`"}`)
	if resp.Status != http.StatusOK {
		return nil
	}
	var info longhorn.SnapshotInfo
	if err := json.Unmarshal([]byte(resp.Raw), &info); err != nil {
		t.Fatalf("snapshotGet %s of volume %s: %v", name, volume, err)
	}
	return &info
}

// Watcher is what writesUntil needs of a typed client.
type Watcher interface {
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// WritesUntil watches the object created (by name, from its creation)
// and counts the writes made to it until done holds for it; it returns
// the count and the object as done saw it. It fails the test after 60 s.
func WritesUntil[T metav1.Object](t *testing.T, client Watcher, created T, what string, done func(T) bool) (int, T) {
	t.Helper()
	w, err := client.Watch(context.Background(), metav1.ListOptions{
		FieldSelector:   "metadata.name=" + created.GetName(),
		ResourceVersion: created.GetResourceVersion(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	writes := 0
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of %s closed before %s", created.GetName(), what)
			}
			if ev.Type != watch.Modified {
				continue
			}
			writes++
			if obj, ok := ev.Object.(T); ok && done(obj) {
				return writes, obj
			}
		case <-timeout:
			t.Fatalf("%s: not %s within 60s (%d writes seen)", created.GetName(), what, writes)
		}
	}
}
