//go:build e2e

package backup

import (
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// listedWithin bounds the time from the engine's end of a backup to its
// listing in these tests: the goal is 0.5 s (docs/benchmarks.md measures
// it), the bound leaves room for a loaded machine and stays well under
// the Engine mirror's 5 s pace, which listed it before.
const listedWithin = 2 * time.Second

// A backup is listed Completed, under a BackupVolume that exists, once
// the engine ends it, with polls of the target 5 minutes apart: the
// first of the volume (no BackupVolume before it) and an incremental one.
// The whole target is read once, by the poll at the target's setting.
func TestABackupIsListedWhenItCompletes(t *testing.T) {
	t.Parallel()
	backupsListedWhenTheyComplete(t, newListedEnv(t))
}

// The same with the engine in an instance manager: its watch says the
// backup's end (pb.Instance.backups_finished).
func TestABackupInAnInstanceManagerIsListedWhenItCompletes(t *testing.T) {
	t.Parallel()
	backupsListedWhenTheyComplete(t, newListedEnv(t, framework.InstanceManagerProcess(t)))
}

func backupsListedWhenTheyComplete(t *testing.T, env *listedEnv) {
	endpoint := env.attach(t, "listed", "64Mi")
	framework.QemuIO(t, endpoint, "write -P 0x5a 0 16M", "flush")
	if status, _ := env.try(t, "GET", "/v1/backupvolumes/listed", ""); status != 404 {
		t.Fatalf("a backup volume before the first backup: %d", status)
	}
	for i, snap := range []string{"first", "second"} {
		if i > 0 {
			framework.QemuIO(t, endpoint, "write -P 0x33 32M 4M", "flush")
		}
		b := env.backup(t, "listed", snap)
		t.Logf("backup %s (%s): the engine took %v, listed Completed %v after", b.name, snap, b.engine().Round(time.Millisecond), b.listedAfter().Round(time.Millisecond))
		if b.listedAfter() > listedWithin {
			t.Errorf("backup %s listed Completed %v after the engine ended it, want within %v", b.name, b.listedAfter(), listedWithin)
		}
		framework.Eventually(t, 5*time.Second, "the backup volume names "+b.name, func() (bool, error) {
			bv := env.call(t, "GET", "/v1/backupvolumes/listed", "", 200)
			return bv["lastBackupName"] == b.name && bv["size"] == "67108864", nil
		})
	}
	list := env.call(t, "POST", "/v1/backupvolumes/listed?action=backupList", "", 200)["data"].([]any)
	if len(list) != 2 {
		t.Fatalf("backupList: %v", list)
	}
	for _, item := range list {
		if b := item.(map[string]any); b["state"] != "Completed" || b["size"] == "" || b["snapshotCreated"] == "" {
			t.Errorf("backup listed as %v", b)
		}
	}
	polls := 0
	for _, r := range env.counter.Requests() {
		if r.Kind == "LIST" && r.Key == "backupstore/volumes/" {
			polls++
		}
	}
	if polls > 1 {
		t.Errorf("the whole target was read %d times; the poll interval is %s s", polls, longPoll)
	}
}
