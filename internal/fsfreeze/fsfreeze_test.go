package fsfreeze

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/csi/nodestate"
	"github.com/cadence-storage/longhorn-manager/internal/fstrim"
)

// mountedExt4 is an ext4 filesystem on a loop device, mounted, and staged
// as volume "vol" in a CSI state directory: what the Node service leaves.
type mountedExt4 struct {
	// img is the loop device's file: what reached the device.
	img, dev, mnt string
	freezer       Freezer
}

func newMountedExt4(t *testing.T) *mountedExt4 {
	t.Helper()
	if testing.Short() {
		t.Skip("makes, mounts and freezes an ext4 filesystem on a loop device")
	}
	if os.Geteuid() != 0 {
		t.Skip("makes a loop device and mounts it: needs root")
	}
	sh := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "fs.img")
	sh("truncate", "-s", "64M", img)
	sh("mkfs.ext4", "-q", "-F", img)
	dev := sh("losetup", "--find", "--show", img)
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	sh("mount", dev, mnt)
	t.Cleanup(func() {
		_ = exec.Command("fsfreeze", "-u", mnt).Run()
		sh("umount", mnt)
		sh("losetup", "-d", dev)
	})
	state := filepath.Join(dir, "csi")
	if err := nodestate.Save(nodestate.Dir(state), &nodestate.Volume{VolumeID: "vol", Endpoint: "nbd://127.0.0.1:1/vol", Device: dev,
		StagingPath: mnt, FsType: "ext4"}); err != nil {
		t.Fatal(err)
	}
	return &mountedExt4{img: img, dev: dev, mnt: mnt, freezer: Freezer{Locate: fstrim.Trimmer{StateDir: state}}}
}

// needsRecovery reads ext4's superblock from what reached the device (the
// loop device's file): whether its journal must be replayed before the
// filesystem is consistent (INCOMPAT_RECOVER). A mounted ext4 has it set;
// a frozen one has it clear, its journal flushed.
func needsRecovery(t *testing.T, img string) bool {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if magic := binary.LittleEndian.Uint16(buf[1024+0x38:]); magic != 0xEF53 {
		t.Fatalf("no ext4 superblock in %s (magic %#x)", img, magic)
	}
	return binary.LittleEndian.Uint32(buf[1024+0x60:])&0x4 != 0
}

// writeSynced writes a file in dir and syncs it; it returns when done.
func writeSynced(dir string) <-chan error {
	done := make(chan error, 1)
	go func() {
		f, err := os.Create(filepath.Join(dir, "during-"+time.Now().Format("150405.000000000")))
		if err == nil {
			_, err = f.Write([]byte("written while a snapshot is taken"))
		}
		if err == nil {
			err = f.Sync()
		}
		if f != nil {
			_ = f.Close()
		}
		done <- err
	}()
	return done
}

func TestAFrozenFilesystemHoldsWritersAndIsConsistentOnItsDevice(t *testing.T) {
	m := newMountedExt4(t)
	// Writes before, left in the page cache and the journal.
	if err := os.WriteFile(filepath.Join(m.mnt, "before"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if !needsRecovery(t, m.img) {
		t.Fatal("a mounted ext4 must need journal recovery on its device (the flag the freeze clears)")
	}
	var writer <-chan error
	err := m.freezer.Around(context.Background(), "vol", func() error {
		if needsRecovery(t, m.img) {
			t.Error("while frozen, the device's ext4 still needs journal recovery: not consistent")
		}
		writer = writeSynced(m.mnt)
		select {
		case err := <-writer:
			t.Errorf("a write went through while the filesystem was frozen: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Around: %v", err)
	}
	select {
	case err := <-writer:
		if err != nil {
			t.Fatalf("the held write failed after the thaw: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held write did not go through after the thaw")
	}
}

func TestAFreezeIsThawedWhateverTheSnapshotDoes(t *testing.T) {
	m := newMountedExt4(t)
	boom := errors.New("the snapshot failed")
	if err := m.freezer.Around(context.Background(), "vol", func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Around returned %v, want the snapshot's error", err)
	}
	select {
	case err := <-writeSynced(m.mnt):
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the filesystem stayed frozen after a failed snapshot")
	}

	// A snapshot that takes longer than the bound: thawed at the bound.
	m.freezer.Bound = 200 * time.Millisecond
	err := m.freezer.Around(context.Background(), "vol", func() error {
		select {
		case err := <-writeSynced(m.mnt):
			if err != nil {
				t.Error(err)
			}
		case <-time.After(5 * time.Second):
			t.Error("the filesystem stayed frozen past its bound")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAFilesystemFrozenByAnotherIsLeftFrozen(t *testing.T) {
	m := newMountedExt4(t)
	if out, err := exec.Command("fsfreeze", "-f", m.mnt).CombinedOutput(); err != nil {
		t.Fatalf("fsfreeze -f: %v %s", err, out)
	}
	ran := false
	if err := m.freezer.Around(context.Background(), "vol", func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("Around on a filesystem frozen by another: %v (ran %v)", err, ran)
	}
	writer := writeSynced(m.mnt)
	select {
	case <-writer:
		t.Fatal("the filesystem another froze was thawed")
	case <-time.After(300 * time.Millisecond):
	}
	if out, err := exec.Command("fsfreeze", "-u", m.mnt).CombinedOutput(); err != nil {
		t.Fatalf("fsfreeze -u: %v %s", err, out)
	}
	if err := <-writer; err != nil {
		t.Fatal(err)
	}
}

func TestAVolumeWithNoFilesystemHereIsSnapshottedAsItIs(t *testing.T) {
	f := Freezer{Locate: fstrim.Trimmer{StateDir: t.TempDir()}}
	ran := false
	if err := f.Around(context.Background(), "not-staged", func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("Around of a volume staged nowhere: %v (ran %v)", err, ran)
	}
	calls := 0
	g := Guard{Freezer: f, Enabled: func(string) (bool, error) { calls++; return false, errors.New("volume not found") }}
	if err := g.Around(context.Background(), "vol", func() error { t.Fatal("snapshot taken without its policy known"); return nil }); err == nil || calls != 1 {
		t.Fatalf("Guard with an unknown policy: %v", err)
	}
}
