//go:build e2e

package backup

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore/s3test"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// A backup-verify drill on file:// and on a real S3 server: a whole
// backup passes (asked for on demand, backupVerify); one block corrupted,
// one truncated and one deleted in the target are each reported by the
// next drill (a recurring job's run, the CronJob pod's command) with its
// offset and reason, on the Backup, the volume, an event and /metrics;
// the run fails; the volume's next backup is full, and a volume restored
// from it reads every byte written.
func TestADrillFindsDamagedBlocksAndTheNextBackupIsFull(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		drillScenario(t, "file://"+t.TempDir(), nil)
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		srv := s3test.Start(t)
		drillScenario(t, srv.Target(""), srv.Credential())
	})
}

const drillBlocks = 8

func drillScenario(t *testing.T, target string, cred map[string]string) {
	e := framework.NewAPIEnv(t)
	if cred != nil {
		e.PutSecret(t, "s3-secret", cred)
		e.Call(t, "PUT", "/v1/settings/backup-target-credential-secret", `{"value":"s3-secret"}`).Expect(t, 200)
	}
	e.SetBackupTarget(t, target)
	e.Call(t, "POST", "/v1/volumes", fmt.Sprintf(`{"name":"db","size":"%dMi","numberOfReplicas":1}`, 2*drillBlocks)).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/db?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "db", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	// Each 2 MiB block its own content.
	want := make([]byte, drillBlocks*backupstore.BlockSize)
	var writes []string
	for i := 0; i < drillBlocks; i++ {
		writes = append(writes, fmt.Sprintf("write -P 0x%02x %dM 2M", 0x11+i, 2*i))
		copy(want[i*backupstore.BlockSize:], bytes.Repeat([]byte{byte(0x11 + i)}, backupstore.BlockSize))
	}
	framework.QemuIO(t, v["endpoint"].(string), append(writes, "flush")...)
	b1 := takeBackup(t, e, "s1")
	if mode := backupObject(t, e, b1).Status.BackupMode; mode != "full" {
		t.Fatalf("the first backup is %q", mode)
	}

	// On demand: a whole backup passes, its digest matched.
	r := e.Call(t, "POST", "/v1/backupvolumes/db?action=backupVerify", `{}`).Expect(t, 200)
	if r.Body["name"] != b1 || r.Body["verifyRequestedAt"] == "" {
		t.Fatalf("backupVerify answered %s", r.Raw)
	}
	ver := waitDrill(t, e, b1, r.Body["verifyRequestedAt"].(string))
	if ver.Result != longhorn.BackupVerificationPassed || ver.Digest != backupstore.DigestMatched || ver.BlocksRead != drillBlocks {
		t.Fatalf("the drill of a whole backup: %+v", ver)
	}
	e.Call(t, "POST", "/v1/backupvolumes/db?action=backupVerify", `{"name":"nope"}`).Expect(t, 404, "name")

	// Damage three blocks in the target, as rot or a hand would.
	store, err := backupstore.OpenWithCredential(target, cred)
	if err != nil {
		t.Fatal(err)
	}
	d, err := backupstore.NewDriver(target, cred)
	if err != nil {
		t.Fatal(err)
	}
	info, err := store.Get("db", b1)
	if err != nil || len(info.Blocks) != drillBlocks {
		t.Fatalf("backup %s: %+v, %v", b1, info, err)
	}
	key := func(i int) string { return backupstore.BlockKey(info, info.Blocks[i]) }
	read := func(i int) []byte {
		data, err := d.Read(key(i), 8<<20)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if err := d.Write(key(2), read(0)); err != nil { // another block's content
		t.Fatal(err)
	}
	if err := d.Write(key(4), read(4)[:len(read(4))/2]); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(key(6)); err != nil {
		t.Fatal(err)
	}

	// A backup-verify job's run, as its CronJob pod runs it: it fails,
	// naming the damage.
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"drill","task":"backup-verify","cron":"@weekly","retain":0,"concurrency":1,"groups":["default"]}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "job cached", func() (bool, error) { return e.Call(t, "GET", "/v1/recurringjobs/drill", "").Status == 200, nil })
	cmd := exec.Command(framework.ManagerBinary(t), "recurring-job", "drill", "--manager-url", e.Base+"/v1",
		"--kubeconfig", framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS), "--namespace", e.NS, "--tick", "2026-11-26T00:00:00Z", "--backup-timeout", "1m")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "failed=1") {
		t.Fatalf("the drill's run: %v\n%s", err, out)
	}
	ver = backupObject(t, e, b1).Status.Verification
	offsets := []int64{info.Blocks[2].Offset, info.Blocks[4].Offset, info.Blocks[6].Offset}
	if ver == nil || ver.Result != longhorn.BackupVerificationFailed || ver.BadBlocks != 3 || ver.FirstBadBlockOffset == nil ||
		*ver.FirstBadBlockOffset != offsets[0] || ver.FirstBadBlockReason != backupstore.BlockChecksumMismatch {
		t.Fatalf("the drill of the damaged backup: %+v", ver)
	}
	for i, reason := range []string{backupstore.BlockChecksumMismatch, backupstore.BlockTruncated, backupstore.BlockMissing} {
		if said := fmt.Sprintf("offset %d %s", offsets[i], reason); !strings.Contains(ver.Message, said) {
			t.Errorf("the drill's message %q does not say %q", ver.Message, said)
		}
	}
	vol, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "db", metav1.GetOptions{})
	if err != nil || vol.Status.LastBackupVerification == nil || vol.Status.LastBackupVerification.Backup != b1 ||
		vol.Status.LastBackupVerification.Result != longhorn.BackupVerificationFailed {
		t.Fatalf("the volume's record of the drill: %+v, %v", vol.Status.LastBackupVerification, err)
	}
	e.WaitEvent(t, "Volume", "db", "BackupVerifyFailed", "next backup will be full")
	framework.Eventually(t, 30*time.Second, "the failed drill on /metrics", func() (bool, error) {
		m := e.ScrapeMetrics(t)
		return m[`longhorn_backup_verify_result{backup="`+b1+`",result="Failed",volume="db"}`] == 1 &&
			m[`longhorn_volume_newest_backup_verified_timestamp_seconds{backup_target="default",volume="db"}`] == 0, nil
	})

	// The next backup, asked for as incremental, is full; it heals the
	// blocks, and a volume restored from it reads every byte.
	e.Call(t, "POST", "/v1/volumes/db?action=snapshotCreate", `{"name":"s2"}`).Expect(t, 200)
	b2 := backupOf(t, e, "s2")
	b := backupObject(t, e, b2)
	if b.Status.BackupMode != "full" || b.Status.ReUploadedDataSize == "0" {
		t.Fatalf("the backup after the failed drill: mode %q, re-uploaded %s", b.Status.BackupMode, b.Status.ReUploadedDataSize)
	}
	e.Call(t, "POST", "/v1/volumes", fmt.Sprintf(`{"name":"copy","size":"%dMi","numberOfReplicas":1,"fromBackup":"%s"}`, 2*drillBlocks, b.Status.URL)).Expect(t, 200)
	framework.Eventually(t, 60*time.Second, "restore done", func() (bool, error) {
		c, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "copy", metav1.GetOptions{})
		return err == nil && c.Status.RestoreInitiated && !c.Status.RestoreRequired, nil
	})
	e.Call(t, "POST", "/v1/volumes/copy?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	c := e.WaitVolume(t, "copy", "restored volume attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	if got := framework.DeviceContent(t, c["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Fatal("the volume restored from the full backup differs from what was written")
	}
	// And the next drill passes.
	r = e.Call(t, "POST", "/v1/backupvolumes/db?action=backupVerify", `{}`).Expect(t, 200)
	if ver := waitDrill(t, e, b2, r.Body["verifyRequestedAt"].(string)); ver.Result != longhorn.BackupVerificationPassed {
		t.Fatalf("the drill of the full backup: %+v", ver)
	}
}

// takeBackup snapshots the volume and backs the snapshot up.
func takeBackup(t *testing.T, e *framework.APIEnv, snapshot string) string {
	t.Helper()
	e.Call(t, "POST", "/v1/volumes/db?action=snapshotCreate", `{"name":"`+snapshot+`"}`).Expect(t, 200)
	return backupOf(t, e, snapshot)
}

// backupOf backs a snapshot up and waits for the backup to complete.
func backupOf(t *testing.T, e *framework.APIEnv, snapshot string) string {
	t.Helper()
	name := e.Call(t, "POST", "/v1/volumes/db?action=snapshotBackup", `{"name":"`+snapshot+`"}`).Expect(t, 200).Body["name"].(string)
	framework.Eventually(t, 60*time.Second, "backup "+name+" Completed", func() (bool, error) {
		b, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && b.Status.State == longhorn.BackupStateCompleted, nil
	})
	return name
}

func backupObject(t *testing.T, e *framework.APIEnv, name string) *longhorn.Backup {
	t.Helper()
	b, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitDrill waits for the drill asked for at requestedAt and returns it.
func waitDrill(t *testing.T, e *framework.APIEnv, backup, requestedAt string) *longhorn.BackupVerification {
	t.Helper()
	return waitDrillFor(t, e, backup, requestedAt, 60*time.Second)
}

// waitDrillFor is waitDrill for a drill that may take up to timeout (a
// full drill of a larger volume).
func waitDrillFor(t *testing.T, e *framework.APIEnv, backup, requestedAt string, timeout time.Duration) *longhorn.BackupVerification {
	t.Helper()
	asked, err := time.Parse(time.RFC3339, requestedAt)
	if err != nil {
		t.Fatal(err)
	}
	var ver *longhorn.BackupVerification
	framework.Eventually(t, timeout, "the drill of "+backup, func() (bool, error) {
		ver = backupObject(t, e, backup).Status.Verification
		return ver != nil && !ver.RequestedAt.Time.Before(asked), nil
	})
	return ver
}
