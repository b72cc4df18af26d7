package manager

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// A handler that panics for one file answers an internal error, and the
// manager goes on serving the disk's other files.
func TestHandlerPanicIsInternal(t *testing.T) {
	n := startManager(t, "", "disk-uuid", nil)
	n.srv.mu.Lock()
	n.srv.files["broken"] = &file{} // no info: a Get naming a uuid panics on it
	n.srv.mu.Unlock()
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		_, err := n.client.Get(ctx, "broken", "some-uuid")
		if err == nil || !strings.Contains(err.Error(), "internal error") {
			t.Fatalf("Get(broken): %v, want an internal error", err)
		}
		if _, err := n.client.Get(ctx, "other", ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(other) after a panic: %v, want the manager serving (not found)", err)
		}
	}
}

// A panic in a fetch or sync fails that file with an internal error; the
// manager goes on.
func TestWorkPanicFailsTheFile(t *testing.T) {
	n := startManager(t, "", "disk-uuid", nil)
	if _, err := n.srv.start("broken", "u1", "", func(context.Context, logrus.FieldLogger) error {
		var m map[string]int
		m["x"]++ // a runtime panic, as a bug in a fetch would be
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wantState(t, waitFile(t, n.client, "broken"), longhorn.BackingImageStateFailed, "internal error")
	if _, err := n.client.List(context.Background()); err != nil {
		t.Fatalf("the manager after a panic in a fetch: %v", err)
	}
}
