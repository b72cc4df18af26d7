package replica

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

func openLayers(r *Replica) int {
	n := 0
	for _, f := range r.chain {
		if f != nil {
			n++
		}
	}
	return n
}

func TestOnlyLayersSomeBlockReadsFromStayOpen(t *testing.T) {
	r, dir := newReplica(t)
	for i := 0; i < 30; i++ {
		if err := r.CreateSnapshot(fmt.Sprintf("empty-%d", i), true, time.Unix(int64(i), 0), nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := openLayers(r); got != 1 {
		t.Fatalf("30 empty snapshots: %d layer files open, want only the head", got)
	}

	// A snapshot holding data stays open; one whose only block a newer
	// layer covers does not, once reopened.
	want := make([]byte, testSize)
	first, second := fill(1, BlockSize), fill(2, BlockSize)
	write(t, r, 0, first)
	if err := r.CreateSnapshot("covered", true, time.Unix(100, 0), nil); err != nil {
		t.Fatal(err)
	}
	write(t, r, 0, second)
	write(t, r, BlockSize, first)
	copy(want, second)
	copy(want[BlockSize:], first)
	if err := r.CreateSnapshot("holds-data", true, time.Unix(101, 0), nil); err != nil {
		t.Fatal(err)
	}
	if got := openLayers(r); got != 3 {
		t.Fatalf("%d layer files open, want covered, holds-data and the head", got)
	}
	if !bytes.Equal(image(t, r), want) {
		t.Fatal("reads differ from what was written")
	}
	if !bytes.Equal(snapshotImage(t, r, "covered")[:BlockSize], first) {
		t.Fatal("the covered snapshot lost its data")
	}
	r.Close()
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := openLayers(r); got != 2 {
		t.Fatalf("reopened: %d layer files open, want holds-data and the head", got)
	}
	if !bytes.Equal(image(t, r), want) {
		t.Fatal("reopened: reads differ from what was written")
	}
}
