package volumeengine

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// newNamedEngine is an engine of volume name over n new replicas of size
// bytes.
func newNamedEngine(t *testing.T, name string, n int, size int64) *Engine {
	t.Helper()
	replicas := map[string]*replica.Replica{}
	for i := 0; i < n; i++ {
		r, err := replica.Create(filepath.Join(t.TempDir(), "r"), size)
		if err != nil {
			t.Fatal(err)
		}
		replicas[string(rune('a'+i))] = r
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	e, err := New(name, replicas, clocktesting.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)), logrus.NewEntry(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func readAll(t *testing.T, r interface {
	ReadAt([]byte, int64) (int, error)
}, n int64) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := r.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestACloneHoldsTheSnapshotsBytesAndLeavesTheSourceAlone(t *testing.T) {
	src := newNamedEngine(t, "src", 2, size)
	// Data before the snapshot: across block edges, at the start and at
	// the very end; a hole between.
	for _, w := range []struct {
		off  int64
		seed int64
		n    int
	}{{0, 1, 5000}, {1<<20 + 4000, 2, 3 << 20 / 2}, {size - 4096, 3, 4096}} {
		if _, err := src.WriteAt(random(w.seed, w.n), w.off); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.CreateSnapshot("snap", nil); err != nil {
		t.Fatal(err)
	}
	view, release, err := src.OpenSnapshotForRead("snap", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	want := readAll(t, view, size)
	// Data changed after the snapshot: the clone must not see it.
	if _, err := src.WriteAt(random(4, 8192), 100); err != nil {
		t.Fatal(err)
	}
	if _, err := src.WriteAt(random(5, 4096), 3<<20); err != nil {
		t.Fatal(err)
	}
	srcHead := readAll(t, src, size)
	if bytes.Equal(srcHead, want) {
		t.Fatal("the source's head should differ from its snapshot for this test to mean anything")
	}

	dst := newNamedEngine(t, "dst", 2, size+(2<<20))
	if err := dst.Clone(context.Background(), "snap://src/snap", view); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, dst, size+(2<<20))
	if !bytes.Equal(got[:size], want) {
		t.Fatal("the clone does not hold the snapshot's bytes")
	}
	if !bytes.Equal(got[size:], make([]byte, 2<<20)) {
		t.Fatal("the clone's bytes past the source's size are not zeros")
	}
	for _, m := range dst.replicas {
		if b := readAll(t, m.r, size); !bytes.Equal(b, want) {
			t.Fatalf("replica %s of the clone does not hold the snapshot's bytes", m.name)
		}
	}
	if st := dst.CloneStatus(); st.IsCloning || st.State != "complete" || st.Progress != 100 || st.Source != "snap://src/snap" {
		t.Fatalf("clone status %+v", st)
	}
	if b := readAll(t, src, size); !bytes.Equal(b, srcHead) {
		t.Fatal("the clone changed the source's data")
	}
	if b := readAll(t, view, size); !bytes.Equal(b, want) {
		t.Fatal("the clone changed the source's snapshot")
	}
}

func TestACloneRefusesAVolumeThatMayHoldData(t *testing.T) {
	src := newNamedEngine(t, "src", 1, size)
	if _, err := src.WriteAt(random(1, 4096), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := src.CreateSnapshot("snap", nil); err != nil {
		t.Fatal(err)
	}
	view, release, err := src.OpenSnapshotForRead("snap", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	small := newNamedEngine(t, "small", 1, size-(2<<20))
	if err := small.Clone(context.Background(), "snap://src/snap", view); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a clone into a smaller volume: %v", err)
	}
	withSnap := newNamedEngine(t, "used", 1, size)
	if _, err := withSnap.CreateSnapshot("mine", nil); err != nil {
		t.Fatal(err)
	}
	if err := withSnap.Clone(context.Background(), "snap://src/snap", view); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("a clone into a volume with snapshots: %v", err)
	}
	withFrontend := newNamedEngine(t, "served", 1, size)
	withFrontend.SetFrontend(true)
	if err := withFrontend.Clone(context.Background(), "snap://src/snap", view); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("a clone into a volume with a frontend: %v", err)
	}
	for _, e := range []*Engine{small, withSnap, withFrontend} {
		if b := readAll(t, e, e.Size()); !bytes.Equal(b, make([]byte, len(b))) {
			t.Fatalf("a refused clone wrote into volume %s", e.Name())
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dst := newNamedEngine(t, "dst", 1, size)
	if err := dst.Clone(ctx, "snap://src/snap", view); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled clone: %v", err)
	}
	if st := dst.CloneStatus(); st.IsCloning || st.State != "error" || st.Error == "" {
		t.Fatalf("a cancelled clone's status: %+v", st)
	}
	if _, err := dst.CreateSnapshot("after", nil); err != nil {
		t.Fatalf("a snapshot after the clone ended: %v", err)
	}
}

// A clone tried again into a volume a failed attempt wrote into (from a
// source since replaced by another of the same name) holds the new
// snapshot's bytes alone: what the snapshot reads as zeros is zeros.
func TestARetriedCloneKeepsNothingOfAnEarlierAttempt(t *testing.T) {
	src := newNamedEngine(t, "src", 1, size)
	if _, err := src.WriteAt(random(1, 8192), 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := src.CreateSnapshot("snap", nil); err != nil {
		t.Fatal(err)
	}
	view, release, err := src.OpenSnapshotForRead("snap", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	want := readAll(t, view, size)

	dst := newNamedEngine(t, "dst", 2, size+(2<<20))
	// What an earlier attempt left: over the snapshot's data, in its
	// holes, and past its end.
	for _, w := range []struct {
		off  int64
		seed int64
		n    int
	}{{1 << 20, 7, 4096}, {0, 8, 3 << 20 / 2}, {3 << 20, 9, 100}, {size + 4096, 10, 1 << 20}} {
		if _, err := dst.WriteAt(random(w.seed, w.n), w.off); err != nil {
			t.Fatal(err)
		}
	}
	if err := dst.Clone(context.Background(), "snap://src/snap", view); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, dst, size+(2<<20))
	if !bytes.Equal(got[:size], want) || !bytes.Equal(got[size:], make([]byte, 2<<20)) {
		t.Fatal("the clone kept bytes of an earlier attempt")
	}
}

// A clone's hold of its snapshot lasts while it reads it, not after: the
// snapshot may be deleted once the clone is done.
func TestAClonesSnapshotMayBeDeletedOnceItIsDone(t *testing.T) {
	src := newNamedEngine(t, "src", 1, size)
	if _, err := src.CreateSnapshot("snap", nil); err != nil {
		t.Fatal(err)
	}
	_, release, err := src.OpenSnapshotForClone("snap")
	if err != nil {
		t.Fatal(err)
	}
	if err := src.DeleteSnapshot("snap"); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("a delete while the clone reads: %v", err)
	}
	release()
	if err := src.DeleteSnapshot("snap"); err != nil {
		t.Fatalf("a delete once the clone is done: %v", err)
	}
}
