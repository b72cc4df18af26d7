//go:build e2e

package csi

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// snapshotNeedsRecovery clones the volume's snapshot, reads the clone
// whole and says whether its ext4 needs a journal replay before it is
// consistent (the superblock's INCOMPAT_RECOVER), and what e2fsck -fn
// says of it.
func snapshotNeedsRecovery(t *testing.T, e *csiNodeEnv, volume, snapshot string) (bool, error) {
	t.Helper()
	clone := "of-" + snapshot
	e.WaitSnapshotReady(t, snapshot)
	e.Call(t, "POST", "/v1/volumes", fmt.Sprintf(`{"name":%q,"size":"64Mi","numberOfReplicas":1,"dataSource":"snap://%s/%s"}`, clone, volume, snapshot)).Expect(t, 200)
	e.WaitCloned(t, clone)
	data := e.AttachedContent(t, clone)
	if magic := binary.LittleEndian.Uint16(data[1024+0x38:]); magic != 0xEF53 {
		t.Fatalf("snapshot %s holds no ext4 superblock (magic %#x)", snapshot, magic)
	}
	img := filepath.Join(t.TempDir(), snapshot+".img")
	if err := os.WriteFile(img, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("e2fsck", "-fn", img).CombinedOutput()
	if err != nil {
		err = fmt.Errorf("e2fsck -fn: %v\n%s", err, out)
	}
	return binary.LittleEndian.Uint32(data[1024+0x60:])&0x4 != 0, err
}

// A snapshot of a volume whose filesystem a pod mounts, taken while a
// writer writes, is filesystem-consistent when the volume's snapshots
// freeze it: by the freeze-filesystem-for-snapshot setting (a Snapshot
// object, as the UI and the CSI snapshotter make, through the snapshot
// controller), and by the volume's own freezeFilesystemForSnapshot (the
// API's snapshotCreate, through the engine service). A clone of each
// needs no journal replay and e2fsck finds it clean; the writer saw no
// error and went on after each. With the volume's disabled, the snapshot
// is only crash-consistent: its journal needs a replay.
func TestSnapshotsFreezeTheMountedFilesystem(t *testing.T) {
	for _, tool := range []string{"fsfreeze", "e2fsck", "nbdcopy"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	e := newCSINodeEnv(t)
	staging := e.path("staging")
	e.attachedVolume(t, "frozen", "64Mi")
	e.stage(t, "frozen", staging, mountCap("ext4"))
	t.Cleanup(func() { e.unstage(t, "frozen", staging) })

	// The writer: files of 64 KiB, never synced by it, one after another.
	var stop atomic.Bool
	var written atomic.Int64
	var writeErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 64<<10)
		for i := 0; !stop.Load(); i++ {
			if err := os.WriteFile(filepath.Join(staging, fmt.Sprintf("f%05d", i%500)), buf, 0o644); err != nil {
				writeErr = err
				return
			}
			written.Add(1)
		}
	}()
	t.Cleanup(func() { stop.Store(true); wg.Wait() })
	writesGoOn := func(after string) {
		t.Helper()
		from := written.Load()
		framework.Eventually(t, 10*time.Second, "the writer writes on after "+after, func() (bool, error) {
			return written.Load() > from+10 || writeErr != nil, nil
		})
		if writeErr != nil {
			t.Fatalf("the writer failed: %v", writeErr)
		}
	}
	writesGoOn("the stage")

	e.Call(t, "PUT", "/v1/settings/freeze-filesystem-for-snapshot", `{"value":"true"}`).Expect(t, 200, `"value":"true"`)
	framework.Eventually(t, 10*time.Second, "the setting cached", func() (bool, error) {
		return e.Call(t, "GET", "/v1/settings/freeze-filesystem-for-snapshot", "").Body["value"] == "true", nil
	})
	e.Call(t, "POST", "/v1/volumes/frozen?action=snapshotCRCreate", `{"name":"by-setting"}`).Expect(t, 200)
	e.WaitSnapshotReady(t, "by-setting")
	writesGoOn("the snapshot by the setting")

	e.Call(t, "PUT", "/v1/settings/freeze-filesystem-for-snapshot", `{"value":"false"}`).Expect(t, 200)
	v := e.Call(t, "POST", "/v1/volumes/frozen?action=updateFreezeFilesystemForSnapshot", `{"freezeFilesystemForSnapshot":"enabled"}`).Expect(t, 200)
	if v.Body["freezeFilesystemForSnapshot"] != "enabled" {
		t.Fatalf("updateFreezeFilesystemForSnapshot answered %s", v.Raw)
	}
	e.Call(t, "POST", "/v1/volumes/frozen?action=updateFreezeFilesystemForSnapshot", `{"freezeFilesystemForSnapshot":"sometimes"}`).
		Expect(t, 400, "freezeFilesystemForSnapshot", "ignored", "enabled", "disabled")
	framework.Eventually(t, 10*time.Second, "the volume's policy cached", func() (bool, error) {
		return e.Call(t, "GET", "/v1/volumes/frozen", "").Body["freezeFilesystemForSnapshot"] == "enabled", nil
	})
	e.Call(t, "POST", "/v1/volumes/frozen?action=snapshotCreate", `{"name":"by-volume"}`).Expect(t, 200)
	writesGoOn("the snapshot by the volume's policy")

	e.Call(t, "POST", "/v1/volumes/frozen?action=updateFreezeFilesystemForSnapshot", `{"freezeFilesystemForSnapshot":"disabled"}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "the volume's policy cached", func() (bool, error) {
		return e.Call(t, "GET", "/v1/volumes/frozen", "").Body["freezeFilesystemForSnapshot"] == "disabled", nil
	})
	e.Call(t, "POST", "/v1/volumes/frozen?action=snapshotCreate", `{"name":"unfrozen"}`).Expect(t, 200)
	writesGoOn("the snapshot without a freeze")
	stop.Store(true)
	wg.Wait()

	for _, snap := range []string{"by-setting", "by-volume"} {
		if recovery, fsck := snapshotNeedsRecovery(t, e, "frozen", snap); recovery || fsck != nil {
			t.Errorf("snapshot %s of the frozen filesystem: needs journal recovery %v; %v", snap, recovery, fsck)
		}
	}
	if recovery, _ := snapshotNeedsRecovery(t, e, "frozen", "unfrozen"); !recovery {
		t.Error("a snapshot of the mounted filesystem taken without a freeze needs no journal recovery: the test cannot tell a freeze from none")
	}
}
