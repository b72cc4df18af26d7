//go:build e2e

package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/backup"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// These tests change the target by hand, which only a poll brings in:
// they poll every pollInterval, and a wait for a poll allows a few.
const (
	pollInterval = "3"
	pollWait     = 45 * time.Second
)

// pollOften sets backupstore-poll-interval to pollInterval through the
// API.
func pollOften(t *testing.T, e *framework.APIEnv) {
	t.Helper()
	e.Call(t, "PUT", "/v1/settings/backupstore-poll-interval", `{"value":"`+pollInterval+`"}`).Expect(t, 200)
}

// backupInTarget writes a real backup of the given bytes into a file://
// target, as another manager's engine would.
func backupInTarget(t *testing.T, root, volume, name string, data []byte) {
	t.Helper()
	store, err := backupstore.Open("file://" + root)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Backup(backupstore.BackupRequest{Name: name, Volume: volume, Snapshot: "snap-" + name, Source: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
}

// targetFiles is every file of a file:// target but its locks, with a
// hash of its content.
func targetFiles(t *testing.T, root string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, "/locks/") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = sha256.Sum256(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(t *testing.T, when string, got, want map[string][32]byte) {
	t.Helper()
	for k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("%s: %s is gone from the target", when, k)
		} else if got[k] != want[k] {
			t.Errorf("%s: %s changed in the target", when, k)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// TestOnlyAUsersDeleteDeletesFromTheTarget: a target that stops listing
// backups (a volume.cfg removed, the target emptied as by an NFS share not
// mounted, the target replaced by another bucket) never makes the manager
// delete anything from it; the Backup objects go and come back with the
// listing. Only a user's delete deletes.
func TestOnlyAUsersDeleteDeletesFromTheTarget(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	root := t.TempDir()
	backupInTarget(t, root, "vol", "backup-one", bytes.Repeat([]byte{'a'}, 3<<20))
	backupInTarget(t, root, "vol", "backup-two", bytes.Repeat([]byte{'b'}, 3<<20))
	before := targetFiles(t, root)
	pollOften(t, e)
	e.SetBackupTarget(t, "file://"+root)
	e.CompletedBackupURL(t, "backup-one")
	e.CompletedBackupURL(t, "backup-two")

	// 1. volume.cfg removed: the backups are still listed, the
	// BackupVolume says the record is missing, nothing is deleted.
	cfg := filepath.Join(root, "backupstore", "volumes", "vol", "volume.cfg")
	record, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	// A poll reads a volume's record again when its backups change, or
	// an hour on; a refresh asked for reads it at once.
	// The API's cache may not hold the BackupVolume yet.
	framework.Eventually(t, 10*time.Second, "a refresh of the backup volume asked for", func() (bool, error) {
		return e.Call(t, "POST", "/v1/backupvolumes/vol?action=backupVolumeSync", "").Status == 200, nil
	})
	framework.Eventually(t, pollWait, "the BackupVolume saying its record is missing", func() (bool, error) {
		bv, err := e.LH.LonghornV1beta2().BackupVolumes(e.NS).Get(context.Background(), "vol", metav1.GetOptions{})
		return err == nil && strings.Contains(bv.Status.Messages[backup.BackupVolumeMessageRecordMissing], "volume.cfg"), nil
	})
	if all, completed := e.BackupCount(t); all != 2 || completed != 2 {
		t.Fatalf("with volume.cfg missing: %d Backup objects, %d Completed; want 2 and 2", all, completed)
	}
	if err := os.WriteFile(cfg, record, 0o644); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "after volume.cfg went missing", targetFiles(t, root), before)
	e.Call(t, "POST", "/v1/backupvolumes/vol?action=backupVolumeSync", "").Expect(t, 200)
	framework.Eventually(t, pollWait, "the record-missing message cleared", func() (bool, error) {
		bv, err := e.LH.LonghornV1beta2().BackupVolumes(e.NS).Get(context.Background(), "vol", metav1.GetOptions{})
		return err == nil && bv.Status.Messages[backup.BackupVolumeMessageRecordMissing] == "", nil
	})

	// 2. The target emptied, as an NFS share that is not mounted: the
	// objects go, and come back with the share; nothing is deleted.
	store := filepath.Join(root, "backupstore")
	if err := os.Rename(store, filepath.Join(root, "away")); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, pollWait, "the Backup objects gone with the target's content", func() (bool, error) {
		all, _ := e.BackupCount(t)
		return all == 0, nil
	})
	if err := os.Rename(filepath.Join(root, "away"), store); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, pollWait, "the Backup objects back with the target's content", func() (bool, error) {
		_, completed := e.BackupCount(t)
		return completed == 2, nil
	})
	sameFiles(t, "after the target was emptied and came back", targetFiles(t, root), before)

	// 3. The target replaced by another: the same.
	e.SetBackupTarget(t, "file://"+t.TempDir())
	framework.Eventually(t, pollWait, "the Backup objects gone with the old target", func() (bool, error) {
		all, _ := e.BackupCount(t)
		return all == 0, nil
	})
	e.SetBackupTarget(t, "file://"+root)
	framework.Eventually(t, pollWait, "the Backup and BackupVolume objects back with the old target", func() (bool, error) {
		_, completed := e.BackupCount(t)
		// The BackupVolume is written after its Backups: the delete
		// below names it.
		return completed == 2 && e.Call(t, "GET", "/v1/backupvolumes/vol", "").Status == 200, nil
	})
	sameFiles(t, "after the target was replaced and set back", targetFiles(t, root), before)

	// 4. A user's delete deletes that backup, and only it.
	e.Call(t, "POST", "/v1/backupvolumes/vol?action=backupDelete", `{"name":"backup-one"}`).Expect(t, 200)
	oneCfg := filepath.Join("backupstore", "volumes", "vol", "backups", "backup_backup-one.cfg")
	framework.Eventually(t, 30*time.Second, "backup-one deleted from the target", func() (bool, error) {
		_, err := os.Stat(filepath.Join(root, oneCfg))
		return os.IsNotExist(err), nil
	})
	after := targetFiles(t, root)
	if _, ok := after[filepath.Join("backupstore", "volumes", "vol", "backups", "backup_backup-two.cfg")]; !ok {
		t.Fatal("backup-two was deleted with backup-one")
	}
}

// TestTwoVolumesBackupsOfOneNameAreKeptApart: two volumes holding a backup
// of the same name (copied by hand, or written by another cluster). The
// Backup object of that name stands for one of them and keeps doing so;
// the other's BackupVolume says why its backup is not shown; a delete
// asked for one volume never deletes the other's.
func TestTwoVolumesBackupsOfOneNameAreKeptApart(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	root := t.TempDir()
	backupInTarget(t, root, "vol-a", "backup-same", bytes.Repeat([]byte{'a'}, 1<<20))
	backupInTarget(t, root, "vol-b", "backup-same", bytes.Repeat([]byte{'b'}, 1<<20))
	pollOften(t, e)
	e.SetBackupTarget(t, "file://"+root)
	framework.Eventually(t, 30*time.Second, "vol-b's BackupVolume saying its backup's name is taken", func() (bool, error) {
		bv, err := e.LH.LonghornV1beta2().BackupVolumes(e.NS).Get(context.Background(), "vol-b", metav1.GetOptions{})
		return err == nil && strings.Contains(bv.Status.Messages[backup.BackupVolumeMessageNameTaken], "volume vol-a's backup"), nil
	})
	// The object stands for vol-a's backup, and does not flip.
	for i := 0; i < 20; i++ {
		b, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), "backup-same", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b.Status.VolumeName != "vol-a" || !strings.Contains(b.Status.URL, "volume=vol-a") {
			t.Fatalf("the Backup object mirrors volume %q (%s), want vol-a", b.Status.VolumeName, b.Status.URL)
		}
		time.Sleep(250 * time.Millisecond)
	}
	cfg := func(vol string) string {
		return filepath.Join(root, "backupstore", "volumes", vol, "backups", "backup_backup-same.cfg")
	}
	// A delete asked for vol-b finds no such backup of vol-b's.
	e.Call(t, "POST", "/v1/backupvolumes/vol-b?action=backupDelete", `{"name":"backup-same"}`).Expect(t, 404)
	// Asked for vol-a, it deletes vol-a's alone; vol-b's then gets the
	// object.
	e.Call(t, "POST", "/v1/backupvolumes/vol-a?action=backupDelete", `{"name":"backup-same"}`).Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "vol-a's backup deleted from the target", func() (bool, error) {
		_, err := os.Stat(cfg("vol-a"))
		return os.IsNotExist(err), nil
	})
	if _, err := os.Stat(cfg("vol-b")); err != nil {
		t.Fatalf("vol-b's backup of the same name: %v", err)
	}
	framework.Eventually(t, pollWait, "the Backup object standing for vol-b's backup", func() (bool, error) {
		b, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), "backup-same", metav1.GetOptions{})
		return err == nil && b.DeletionTimestamp == nil && b.Status.VolumeName == "vol-b" && b.Status.State == "Completed", nil
	})
}
