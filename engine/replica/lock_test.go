package replica

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestSecondOpenIsRefused: a replica open in one engine cannot be opened
// by another (which would write beside it, or remove files it uses as a
// crash's leftovers) until the first closes it.
func TestSecondOpenIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	r, err := Create(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("a second Open of an open replica = %v; want ErrLocked", err)
	}
	if _, err := Create(dir, 1<<20); err == nil {
		t.Fatal("Create over an open replica succeeded")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	again.Close()
}
