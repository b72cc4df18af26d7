package replica

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSnapshotReadRange opens a view of one 8 MiB range of a
// snapshot and reads it, as each SnapshotRead call of an export does.
// The volumes hold data in 1 MiB of every 8 MiB, over 3 snapshots: the
// cost of one call must follow the range, not the volume's size.
func BenchmarkSnapshotReadRange(b *testing.B) {
	const span = 8 << 20
	for _, size := range []int64{1 << 30, 16 << 30, 64 << 30} {
		b.Run(fmt.Sprintf("%dGiB", size>>30), func(b *testing.B) {
			r, err := Create(filepath.Join(b.TempDir(), "r"), size)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			data := make([]byte, 1<<20)
			for i := range data {
				data[i] = byte(i)
			}
			for layer := int64(0); layer < 3; layer++ {
				for off := layer * (1 << 20); off < size; off += span {
					if _, err := r.WriteAt(data, off); err != nil {
						b.Fatal(err)
					}
				}
				if err := r.CreateSnapshot(fmt.Sprintf("s%d", layer), true, time.Now(), nil); err != nil {
					b.Fatal(err)
				}
			}
			buf := make([]byte, span)
			off := size / 2
			b.SetBytes(span)
			b.ResetTimer()
			for b.Loop() {
				v, err := r.OpenSnapshotRange("s2", off, off+span)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := v.ReadAt(buf, off); err != nil {
					b.Fatal(err)
				}
				v.Close()
			}
		})
	}
}
