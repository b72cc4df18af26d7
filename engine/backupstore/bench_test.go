package backupstore

import (
	"fmt"
	"path/filepath"
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

// BenchmarkFullBackup backs the same snapshot up into a new store each
// time: read, checksum, compress, write.
func BenchmarkFullBackup(b *testing.B) {
	_, v := fullVolume(b)
	b.SetBytes(volSize)
	for i := 0; i < b.N; i++ {
		s, err := Open("file://" + filepath.Join(b.TempDir(), fmt.Sprint(i)))
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: v}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIncrementalBackup changes 1% of the volume between backups and
// reports the bytes uploaded per byte of volume.
func BenchmarkIncrementalBackup(b *testing.B) {
	r, v := fullVolume(b)
	s, err := Open("file://" + b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", SnapshotID: v.ID(), Source: v}); err != nil {
		b.Fatal(err)
	}
	prev, prevID := "s1", v.ID()
	var uploaded int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		name := fmt.Sprintf("i%d", i)
		r.WriteAt(random(int64(i+10), volSize/100), int64(i%90)*(volSize/100))
		if err := r.CreateSnapshot(name, true, time.Now(), nil); err != nil {
			b.Fatal(err)
		}
		view, err := r.OpenSnapshot(name)
		if err != nil {
			b.Fatal(err)
		}
		changed, _, err := r.ChangedBlocksByID(prevID, view.ID())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		_, st, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: name, SnapshotID: view.ID(), Source: view, Changed: changed, ChangedSince: prev, ChangedSinceID: prevID})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		prevID = view.ID()
		view.Close()
		uploaded += st.BytesUploaded
		prev = name
		if i%100 == 99 {
			list, _ := r.Snapshots()
			for _, sn := range list[:len(list)-3] {
				r.MarkRemoved(sn.Name)
			}
			r.Purge()
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(uploaded)/float64(b.N)/volSize*100, "%uploaded/volume")
}
