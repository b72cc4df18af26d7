package backupstore

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// oneWriteAtATime is a restore's destination that records its writes'
// progress and fails the test when two writes overlap in time: the restore
// serializes them, so any io.WriterAt may take it.
type oneWriteAtATime struct {
	t   *testing.T
	dst interface {
		WriteAt([]byte, int64) (int, error)
	}
	inFlight atomic.Int32
	writes   atomic.Int32
}

func (w *oneWriteAtATime) WriteAt(p []byte, off int64) (int, error) {
	if w.inFlight.Add(1) != 1 {
		w.t.Errorf("two writes at once (one at %d)", off)
	}
	defer w.inFlight.Add(-1)
	w.writes.Add(1)
	return w.dst.WriteAt(p, off)
}

// A restore on several workers of a volume whose written blocks are
// spread, some of them zeros, one partly written and the last among them,
// reads back byte for byte in every compression, with its progress never
// going back and ending at 100.
func TestRestoreOnWorkersOfSpreadAndZeroBlocksIsByteExact(t *testing.T) {
	for _, method := range []string{CompressionLZ4, CompressionGzip, CompressionNone} {
		t.Run(method, func(t *testing.T) {
			s, _ := newStore(t)
			if err := s.SetBackupDefaults(method, 4); err != nil {
				t.Fatal(err)
			}
			r := newVolume(t, t.TempDir())
			for i, off := range []int64{1 * BlockSize, 3 * BlockSize, 4 * BlockSize, 7 * BlockSize, 10 * BlockSize, 11 * BlockSize, volSize - BlockSize} {
				if _, err := r.WriteAt(halfRandom(int64(i+1), BlockSize), off); err != nil {
					t.Fatal(err)
				}
			}
			// Zeros written over a block, and a block written in part.
			if _, err := r.WriteAt(make([]byte, BlockSize), 4*BlockSize); err != nil {
				t.Fatal(err)
			}
			if _, err := r.WriteAt(make([]byte, BlockSize), 5*BlockSize); err != nil {
				t.Fatal(err)
			}
			if _, err := r.WriteAt(random(9, 4096), 8*BlockSize+12345); err != nil {
				t.Fatal(err)
			}
			if err := r.CreateSnapshot("s1", true, time.Now(), nil); err != nil {
				t.Fatal(err)
			}
			v := snapshotView(t, r, "s1")
			info, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: v})
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, volSize)
			if _, err := v.ReadAt(want, 0); err != nil {
				t.Fatal(err)
			}
			dst := newVolume(t, t.TempDir())
			w := &oneWriteAtATime{t: t, dst: dst}
			var mu sync.Mutex
			var seen []int
			if _, err := s.Restore("vol", info.Name, w, func(p int) {
				mu.Lock()
				seen = append(seen, p)
				mu.Unlock()
			}); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, volSize)
			if _, err := dst.ReadAt(got, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("the restored volume differs from the snapshot backed up")
			}
			if int(w.writes.Load()) != len(info.Blocks) {
				t.Errorf("%d writes for the backup's %d blocks", w.writes.Load(), len(info.Blocks))
			}
			for i := 1; i < len(seen); i++ {
				if seen[i] < seen[i-1] {
					t.Fatalf("progress went back: %v", seen)
				}
			}
			if len(seen) == 0 || seen[len(seen)-1] != 100 {
				t.Fatalf("progress %v does not end at 100", seen)
			}
		})
	}
}

// A block in the middle of a backup that does not decompress, or that
// decompresses to another block's content, fails a restore on several
// workers with an error naming the block, its offset and why; no worker
// is left running and the progress never reaches 100.
func TestRestoreOnWorkersStopsAtACorruptBlockNamingIt(t *testing.T) {
	for _, damage := range []string{"corrupt", "does not match its checksum"} {
		t.Run(damage, func(t *testing.T) {
			s, _ := newStore(t)
			if err := s.SetBackupDefaults(CompressionLZ4, 4); err != nil {
				t.Fatal(err)
			}
			r := newVolume(t, t.TempDir())
			for off := int64(0); off < volSize; off += BlockSize {
				if _, err := r.WriteAt(halfRandom(off, BlockSize), off); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.CreateSnapshot("s1", true, time.Now(), nil); err != nil {
				t.Fatal(err)
			}
			info, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: snapshotView(t, r, "s1")})
			if err != nil {
				t.Fatal(err)
			}
			bad := info.Blocks[len(info.Blocks)/2]
			stored := []byte("rotted")
			if damage != "corrupt" {
				if stored, err = s.driver.Read(BlockKey(info, info.Blocks[0]), maxBlockFileSize); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.driver.Write(BlockKey(info, bad), stored); err != nil {
				t.Fatal(err)
			}
			before := runtime.NumGoroutine()
			last := 0
			_, err = s.Restore("vol", info.Name, newVolume(t, t.TempDir()), func(p int) { last = p })
			if err == nil {
				t.Fatal("a backup with a damaged block restored")
			}
			for _, want := range []string{bad.Checksum, fmt.Sprintf("offset %d", bad.Offset), damage} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error %q does not say %q", err, want)
				}
			}
			if last == 100 {
				t.Error("the progress reached 100")
			}
			deadline := time.Now().Add(5 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before {
				buf := make([]byte, 1<<20)
				t.Fatalf("%d goroutines after the restore, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}

// panickingWriterAt panics on its third write.
type panickingWriterAt struct{ writes atomic.Int32 }

func (w *panickingWriterAt) WriteAt(p []byte, _ int64) (int, error) {
	if w.writes.Add(1) == 3 {
		panic("replica bug")
	}
	return len(p), nil
}

// A destination that panics, on a worker where no caller recovers it,
// fails the restore with the panic, takes neither the process down nor
// the restore's lock with it, and leaves no goroutine.
func TestRestoreOnWorkersTurnsAPanickingWriteIntoItsError(t *testing.T) {
	s, _ := newStore(t)
	if err := s.SetBackupDefaults(CompressionLZ4, 4); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 8*BlockSize)
	for off := 0; off < len(data); off += BlockSize {
		copy(data[off:], halfRandom(int64(off), BlockSize))
	}
	info, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: &memSource{data: data}})
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	if _, err := s.Restore("vol", info.Name, &panickingWriterAt{}, nil); err == nil || !strings.Contains(err.Error(), "replica bug") {
		t.Fatalf("Restore: %v, want the panic as its error", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after the restore, %d before", n, before)
	}
	// The lock was released: the volume restores again.
	mustRestore(t, s, "vol", info.Name, data)
}
