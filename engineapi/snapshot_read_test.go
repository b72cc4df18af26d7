package engineapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
	"github.com/cadence-storage/longhorn-manager/engine/rpc/rpctest"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// serveWithClock is serveVolume with one replica of size bytes and an
// engine on a fake clock.
func serveWithClock(t *testing.T, size int64) (*GRPCClient, *volumeengine.Engine, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := rpctest.Engine(t, "vol", size, clk, "r1")
	c, err := NewGRPCClient(rpctest.Serve(t, e), "vol", 5*time.Second, mtlstest.Identity(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, e, clk
}

// TestSnapshotReadReturnsTheSnapshotAndSkipsHoles: ranges of a snapshot
// read what it held (not later writes), and the engine sends only the
// blocks written, not the empty rest of the volume.
func TestSnapshotReadReturnsTheSnapshotAndSkipsHoles(t *testing.T) {
	const size = 64 << 20
	c, e, _ := serveWithClock(t, size)
	ctx := context.Background()
	want := make([]byte, size)
	for _, w := range []struct {
		off  int64
		data []byte
	}{{0, []byte("boot sector")}, {5<<20 + 100, bytes.Repeat([]byte{0xab}, 3<<20)}, {size - 4096, bytes.Repeat([]byte{7}, 4096)}} {
		if _, err := e.WriteAt(w.data, w.off); err != nil {
			t.Fatal(err)
		}
		copy(want[w.off:], w.data)
	}
	if _, err := c.SnapshotCreate(ctx, "s1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.WriteAt([]byte("after the snapshot"), 0); err != nil {
		t.Fatal(err)
	}

	got := make([]byte, size)
	const window = 7<<20 + 1000 // ranges that are not block-aligned, on purpose
	for off := int64(0); off < size; off += window {
		n := min(window, size-off)
		volSize, err := c.SnapshotRead(ctx, "s1", got[off:off+n], off)
		if err != nil || volSize != size {
			t.Fatalf("read at %d: size %d, %v", off, volSize, err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the snapshot read differs from what was written before it")
	}

	// A range past the volume's end is refused, and does not count
	// against the replica that would have served it.
	if _, err := c.SnapshotRead(ctx, "s1", make([]byte, 8192), size-4096); err == nil || !strings.Contains(err.Error(), "must lie within") {
		t.Fatalf("read past the end: %v, want a refusal naming the rule", err)
	}
	if v, err := c.VolumeGet(ctx); err != nil || v.ReplicaModes["r1"] != "RW" {
		t.Fatalf("after a refused read: %+v, %v; want replica r1 still RW", v, err)
	}

	// The raw stream carries the written blocks only.
	stream, err := c.client.SnapshotRead(ctx, &pb.SnapshotReadRequest{Volume: "vol", Snapshot: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	var sent int
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sent += len(chunk.Data)
	}
	if sent > 4<<20 {
		t.Fatalf("the engine sent %d bytes for about 3 MiB written in a 64 MiB volume: holes were not skipped", sent)
	}
}

// TestSnapshotReadHoldsTheSnapshot: a snapshot being read, or read less
// than the lease ago, cannot be deleted, and says why; after the lease it
// can; a deleted or missing snapshot cannot be read.
func TestSnapshotReadHoldsTheSnapshot(t *testing.T) {
	c, e, clk := serveWithClock(t, 4<<20)
	ctx := context.Background()
	if _, err := c.SnapshotCreate(ctx, "s1", nil); err != nil {
		t.Fatal(err)
	}

	_, release, err := e.OpenSnapshotForRead("s1", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	err = c.SnapshotDelete(ctx, "s1")
	if !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "is being read by 1 export") {
		t.Fatalf("delete during a read: %v", err)
	}
	release()

	if _, err := c.SnapshotRead(ctx, "s1", make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	clk.Step(volumeengine.SnapshotHoldLease - time.Second)
	err = c.SnapshotDelete(ctx, "s1")
	if !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "is held until") {
		t.Fatalf("delete within the lease after a read: %v", err)
	}
	clk.Step(2 * time.Second)
	if err := c.SnapshotDelete(ctx, "s1"); err != nil {
		t.Fatalf("delete after the lease: %v", err)
	}

	if _, err := c.SnapshotRead(ctx, "s1", make([]byte, 4096), 0); !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("read of a deleted snapshot: %v", err)
	}
	if _, err := c.SnapshotRead(ctx, "nothing", make([]byte, 4096), 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read of a missing snapshot: %v", err)
	}
	if _, err := c.SnapshotRead(ctx, "volume-head", make([]byte, 4096), 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("read of volume-head: %v", err)
	}
	if _, err := c.SnapshotCreate(ctx, "s2", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SnapshotRead(ctx, "s2", make([]byte, 8192), 4<<20-4096); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "within the volume") {
		t.Fatalf("read past the end: %v", err)
	}
}

// TestSnapshotReadSurvivesAPurgeOfItsAncestors: purging a removed parent
// merges it into the snapshot being read; what the read returns does not
// change, during the read or after.
func TestSnapshotReadSurvivesAPurgeOfItsAncestors(t *testing.T) {
	const size = 4 << 20
	c, e, _ := serveWithClock(t, size)
	ctx := context.Background()
	want := make([]byte, size)
	old := bytes.Repeat([]byte{1}, 1<<20)
	if _, err := e.WriteAt(old, 0); err != nil {
		t.Fatal(err)
	}
	copy(want, old)
	if _, err := c.SnapshotCreate(ctx, "s1", nil); err != nil {
		t.Fatal(err)
	}
	newer := bytes.Repeat([]byte{2}, 4096)
	if _, err := e.WriteAt(newer, 512<<10); err != nil {
		t.Fatal(err)
	}
	copy(want[512<<10:], newer)
	if _, err := c.SnapshotCreate(ctx, "s2", nil); err != nil {
		t.Fatal(err)
	}

	view, release, err := e.OpenSnapshotForRead("s2", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := c.SnapshotDelete(ctx, "s1"); err != nil {
		t.Fatalf("the parent of the snapshot being read may go: %v", err)
	}
	if err := c.SnapshotPurge(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.SnapshotPurgeStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := true
		for _, s := range st {
			done = done && !s.IsPurging && s.State == "complete"
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("purge still running: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if list, _ := c.SnapshotList(ctx); list["s1"] != nil {
		t.Fatal("s1 was not purged")
	}
	got := make([]byte, size)
	if _, err := view.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the open read changed under the purge (%v)", err)
	}
	if _, err := c.SnapshotRead(ctx, "s2", got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("a read after the purge differs (%v)", err)
	}
}
