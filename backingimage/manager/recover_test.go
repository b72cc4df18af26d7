package manager

import (
	"context"
	"errors"
	"strings"
	"testing"
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
