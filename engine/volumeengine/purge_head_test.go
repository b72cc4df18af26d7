package volumeengine

import (
	"bytes"
	"errors"
	"sync"
	"testing"
)

// Deleting the newest snapshot, the head's parent, and purging takes it
// out of every replica at once, while the volume is written to; what the
// volume reads is what was written, on every replica.
func TestDeletingTheNewestSnapshotPurgesItIntoTheHead(t *testing.T) {
	e, replicas := newEngine(t, 2)
	want := random(1, size)
	e.WriteAt(want, 0)
	if _, err := e.CreateSnapshot("old", nil); err != nil {
		t.Fatal(err)
	}
	second := random(2, size/2)
	e.WriteAt(second, size/4)
	copy(want[size/4:], second)
	if _, err := e.CreateSnapshot("newest", nil); err != nil {
		t.Fatal(err)
	}
	third := random(3, 12345)
	e.WriteAt(third, 3*size/4+7)
	copy(want[3*size/4+7:], third)

	if err := e.DeleteSnapshot("newest"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 100; i++ {
			p := random(int64(10+i), 3000)
			off := int64(i*40961) % (size - 3000)
			mu.Lock()
			_, err := e.WriteAt(p, off)
			copy(want[off:], p)
			mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	e.StartPurge()
	wg.Wait()
	waitPurge(t, e)

	if _, err := e.Snapshot("newest"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the newest snapshot, deleted and purged, is still there: %v", err)
	}
	if !e.WasPurged("newest") {
		t.Fatal("the engine does not remember purging the newest snapshot")
	}
	head, err := e.Snapshot("volume-head")
	if err != nil || head.Parent != "old" {
		t.Fatalf("the head after the purge: %+v, %v", head, err)
	}
	got := make([]byte, size)
	if _, err := e.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the volume reads differently after the purge (%v)", err)
	}
	for name, r := range replicas {
		if _, err := r.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("replica %s reads differently after the purge (%v)", name, err)
		}
		if r.HasSnapshot("newest") {
			t.Fatalf("replica %s still has the newest snapshot", name)
		}
	}
	if e.WasPurged("old") {
		t.Fatal("the kept snapshot is reported purged")
	}
}
