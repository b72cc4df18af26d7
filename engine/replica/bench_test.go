package replica

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkCreateSnapshot takes snapshots of a 16 MiB and a 1 GiB volume
// that each hold 8 MiB of fresh data: the cost must not follow the size.
func BenchmarkCreateSnapshot(b *testing.B) {
	for _, size := range []int64{16 << 20, 1 << 30} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			r, err := Create(filepath.Join(b.TempDir(), "r"), size)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			data := make([]byte, 8<<20)
			for i := range data {
				data[i] = byte(i)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if _, err := r.WriteAt(data, 0); err != nil {
					b.Fatal(err)
				}
				if i > 0 && i%200 == 0 {
					// Stay under MaxSnapshots: purge what was taken so far.
					list, _ := r.Snapshots()
					for _, s := range list[:len(list)-2] {
						_ = r.MarkRemoved(s.Name)
					}
					if _, err := r.Purge(); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				if err := r.CreateSnapshot(fmt.Sprintf("s%d", i), true, time.Now(), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPurgeOneSnapshot merges one removed snapshot holding 16 MiB
// into its child on a 256 MiB volume.
func BenchmarkPurgeOneSnapshot(b *testing.B) {
	data := make([]byte, 16<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r, err := Create(filepath.Join(b.TempDir(), fmt.Sprint(i)), 256<<20)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = r.WriteAt(data, 0)
		_ = r.CreateSnapshot("old", true, time.Now(), nil)
		_, _ = r.WriteAt(data[:4<<20], 8<<20)
		_ = r.CreateSnapshot("child", true, time.Now(), nil)
		_ = r.CreateSnapshot("top", true, time.Now(), nil)
		_ = r.MarkRemoved("old")
		b.StartTimer()
		purged, err := r.Purge()
		if err != nil || len(purged) != 1 {
			b.Fatalf("purged %v, %v", purged, err)
		}
		b.StopTimer()
		r.Close()
		b.StartTimer()
	}
	b.SetBytes(16 << 20)
}

// BenchmarkPurgeNewestSnapshotIntoHead merges the removed newest snapshot,
// holding 16 MiB, into the head (which holds 4 MiB of its own) on a
// 256 MiB volume: how long writes to the volume wait for that deletion.
func BenchmarkPurgeNewestSnapshotIntoHead(b *testing.B) {
	data := make([]byte, 16<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		r, err := Create(filepath.Join(b.TempDir(), fmt.Sprint(i)), 256<<20)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = r.WriteAt(data, 0)
		_ = r.CreateSnapshot("newest", true, time.Now(), nil)
		_, _ = r.WriteAt(data[:4<<20], 8<<20)
		_ = r.MarkRemoved("newest")
		b.StartTimer()
		purged, err := r.Purge()
		if err != nil || len(purged) != 1 {
			b.Fatalf("purged %v, %v", purged, err)
		}
		b.StopTimer()
		r.Close()
		b.StartTimer()
	}
	b.SetBytes(16 << 20)
}
