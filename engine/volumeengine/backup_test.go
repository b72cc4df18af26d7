package volumeengine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

func newEngineOnBacking(t *testing.T, b replica.BackingFile) *Engine {
	t.Helper()
	r, err := replica.CreateOnBacking(filepath.Join(t.TempDir(), "r"), size, b)
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	e, err := New("vol", map[string]*replica.Replica{"a": r}, clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)), logrus.NewEntry(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func waitBackup(t *testing.T, e *Engine, name string) BackupStatus {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if st := e.BackupStatuses()[name]; st.State != BackupStateInProgress {
			return st
		}
	}
	t.Fatalf("backup %s did not finish", name)
	return BackupStatus{}
}

// TestBackupOfAVolumeOnABackingImage: the backup records the image and
// holds only what the layers hold, zeros written over the image included;
// a restore onto a new volume on the same image reads the same disk.
func TestBackupOfAVolumeOnABackingImage(t *testing.T) {
	base := random(7, 3<<20)
	path := filepath.Join(t.TempDir(), "backing")
	if err := os.WriteFile(path, base, 0o644); err != nil {
		t.Fatal(err)
	}
	b := replica.BackingFile{Path: path, Name: "img", Checksum: strings.Repeat("c", 128)}
	e := newEngineOnBacking(t, b)
	if _, err := e.WriteAt([]byte("layered"), 100); err != nil {
		t.Fatal(err)
	}
	// Zeros over the image's data, in a backup block of their own.
	if _, err := e.WriteAt(make([]byte, 4096), 2<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateSnapshot("s1", nil); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, size)
	if _, err := e.ReadAt(want, 0); err != nil {
		t.Fatal(err)
	}

	store, err := backupstore.Open("file://" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.StartBackup("b1", "s1", store, nil); err != nil {
		t.Fatal(err)
	}
	if st := waitBackup(t, e, "b1"); st.State != BackupStateCompleted {
		t.Fatalf("backup: %+v", st)
	}
	info, err := store.Get("vol", "b1")
	if err != nil {
		t.Fatal(err)
	}
	if info.BackingImageName != "img" || info.BackingImageChecksum != b.Checksum {
		t.Fatalf("backup records image %q checksum %q", info.BackingImageName, info.BackingImageChecksum)
	}
	// Two 2 MiB backup blocks hold layer data; the image's other block
	// and the volume's empty tail are not stored.
	if len(info.Blocks) != 2 || info.Blocks[0].Offset != 0 || info.Blocks[1].Offset != 2<<20 {
		t.Fatalf("backup blocks = %+v, want the two holding layer data", info.Blocks)
	}

	restored := newEngineOnBacking(t, b)
	if err := restored.Restore(context.Background(), store, "vol", "b1"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, size)
	if _, err := restored.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the restored volume on the same image reads differently")
	}
}
