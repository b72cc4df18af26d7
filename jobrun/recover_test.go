package jobrun

import (
	"context"
	"testing"

	"github.com/cadence-storage/longhorn-manager/client"
)

// A panic in one volume's work fails that volume only: the run goes on
// with the others and the process with it.
func TestAPanickingVolumeFailsOnlyItself(t *testing.T) {
	f := &fakeManager{snapshots: map[string][]client.Snapshot{}}
	r := newExecutor(t, 4, 2, f)
	r.BeforeVolume = func(_ context.Context, _, volume string) {
		if volume == "vol-0001" {
			var m map[string]int
			m[volume]++ // a runtime panic, as a bug in a task would be
		}
	}
	res, err := r.Run(context.Background(), "snap")
	if err != nil {
		t.Fatal(err)
	}
	if res.Succeeded != 3 || res.Failed != 1 {
		t.Fatalf("result %+v, want the panicking volume failed and the 3 others done", res)
	}
}
