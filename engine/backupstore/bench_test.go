package backupstore

import (
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// fullVolume is a replica whose snapshot s1 holds volSize bytes of data.
func fullVolume(b *testing.B) (*replica.Replica, *replica.SnapshotView) {
	r := newVolume(b, b.TempDir())
	if _, err := r.WriteAt(random(1, volSize), 0); err != nil {
		b.Fatal(err)
	}
	if err := r.CreateSnapshot("s1", true, time.Now(), nil); err != nil {
		b.Fatal(err)
	}
	return r, snapshotView(b, r, "s1")
}

// BenchmarkReadSnapshot is the baseline: reading the snapshot alone.
func BenchmarkReadSnapshot(b *testing.B) {
	_, v := fullVolume(b)
	buf := make([]byte, BlockSize)
	b.SetBytes(volSize)
	for i := 0; i < b.N; i++ {
		for off := int64(0); off < volSize; off += BlockSize {
			if _, err := v.ReadAt(buf, off); err != nil {
				b.Fatal(err)
			}
		}
	}
}
