package replicaproto

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// A write larger than the server's piece goes to the replica piece by
// piece as it arrives: at an offset off every block's boundary, over the
// end of a piece, it reads back whole; a write of an engine that a newer
// one fenced lands nowhere, its data read and dropped, and the
// connection serves on (the fenced engine's next request is refused, not
// misread).
func TestAWriteLargerThanAPieceIsWrittenAsItArrives(t *testing.T) {
	r, addr, _ := serveReplica(t, false)
	c := dial(t, addr, open("engine-a", 1))
	for _, w := range []struct{ off, n int }{
		{12345, 3*streamPiece + 777},
		{streamPiece - 1, streamPiece + 2},
		{4 * streamPiece, 4 * streamPiece},
		{volSize - MaxMessage - 1, MaxMessage},
	} {
		want := make([]byte, w.n)
		_, _ = rand.Read(want)
		if _, err := c.WriteAt(want, int64(w.off)); err != nil {
			t.Fatalf("write of %d at %d: %v", w.n, w.off, err)
		}
		got := make([]byte, w.n)
		if _, err := r.ReadAt(got, int64(w.off)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("write of %d at %d: the replica does not hold it (%v)", w.n, w.off, err)
		}
	}
	if _, err := c.WriteAt(make([]byte, 2*streamPiece), volSize-streamPiece); err == nil {
		t.Fatal("a write past the replica's end was taken")
	}
	// An offset whose sum with the length wraps around is refused, and
	// the connection serves on.
	if _, err := c.do(OpWrite, ^uint64(0)-100, 2*streamPiece, make([]byte, 2*streamPiece)); err == nil {
		t.Fatal("a write at an offset past the replica's end was taken")
	}
	if err := c.Sync(); err != nil {
		t.Fatalf("the connection after a write at a wrapping offset: %v", err)
	}

	before := make([]byte, 2*streamPiece)
	if _, err := r.ReadAt(before, 0); err != nil {
		t.Fatal(err)
	}
	dial(t, addr, open("engine-b", 2))
	if _, err := c.WriteAt(bytes.Repeat([]byte("stale"), 2*streamPiece/5), 0); !errors.Is(err, replica.ErrFenced) {
		t.Fatalf("a fenced engine's large write: want ErrFenced, got %v", err)
	}
	if err := c.Sync(); !errors.Is(err, replica.ErrFenced) {
		t.Fatalf("the fenced engine's next request: want ErrFenced, got %v", err)
	}
	after := make([]byte, 2*streamPiece)
	if _, err := r.ReadAt(after, 0); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("the fenced engine's write landed (%v)", err)
	}
}
