package replica

import (
	"path/filepath"
	"testing"
	"time"
)

// A replica's epoch is durable: it survives snapshots, a purge and a
// reopen, and ReadEpoch reads it without opening the replica.
func TestTheEpochIsKeptByEveryMetadataChange(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	r, err := Create(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if r.Epoch() != 0 {
		t.Fatalf("a new replica's epoch is %d", r.Epoch())
	}
	if err := r.SetEpoch(3); err != nil {
		t.Fatal(err)
	}
	if err := r.CreateSnapshot("s1", true, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	if err := r.MarkRemoved("s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Purge(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := r.SetEpoch(4); err == nil {
		t.Fatal("SetEpoch on a closed replica succeeded")
	}
	if got, err := ReadEpoch(dir); err != nil || got != 3 {
		t.Fatalf("ReadEpoch: %d, %v", got, err)
	}
	r, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Epoch() != 3 {
		t.Fatalf("epoch after a reopen: %d", r.Epoch())
	}
}
