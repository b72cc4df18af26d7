package volume

import (
	"context"
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/internal/synctable"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// The writes of a failing sync say why as far as they can: an Engine
// status write that fails (the Engine is gone) does not keep the Volume's
// from being written, and the sync's own error is returned. A sync that
// goes through stops at that failure and returns it.
func TestAttachWritesOfAFailingSyncAreEachTried(t *testing.T) {
	env := newSyncEnv(t, syncVolume(), syncNode("node-1", true, t.TempDir()))
	v := env.volume(t)
	gone := &longhorn.Engine{ObjectMeta: metav1.ObjectMeta{Name: "vol-e-0", Namespace: "ns"}}
	vstatus := v.Status.DeepCopy()
	vstatus.State = longhorn.VolumeStateDetached
	w := attachWrites{engine: gone, status: &longhorn.EngineStatus{InstanceStatus: longhorn.InstanceStatus{CurrentState: longhorn.InstanceStateError}}, volume: v, vstatus: vstatus}
	cause := errors.New("the engine did not start")

	env.lh.ClearActions()
	if err := env.c.writeFailure(context.Background(), w, cause); err != cause {
		t.Errorf("writeFailure: %v, want the cause", err)
	}
	if writes, want := synctable.Writes(env.lh.Actions()), []string{"update engines/status", "update volumes/status"}; !slices.Equal(writes, want) {
		t.Errorf("writes %v, want %v", writes, want)
	}
	if got := env.volume(t); got.Status.State != longhorn.VolumeStateDetached {
		t.Errorf("volume state %q", got.Status.State)
	}

	env.lh.ClearActions()
	if written, err := env.c.writeAttachment(context.Background(), w); err == nil || written != "" {
		t.Errorf("writeAttachment: %q, %v; want the Engine's write error", written, err)
	}
	if writes, want := synctable.Writes(env.lh.Actions()), []string{"update engines/status"}; !slices.Equal(writes, want) {
		t.Errorf("writes %v, want %v", writes, want)
	}
}
