//go:build e2e

package systembackup

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore/s3test"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

func systemBackup(t *testing.T, e *framework.APIEnv, name string) *longhorn.SystemBackup {
	t.Helper()
	sb, err := e.LH.LonghornV1beta2().SystemBackups(e.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return sb
}

// TestASystemBackupOfOneClusterIsRestoredOnAnother backs up a cluster
// (an attached volume with bytes written and its PV and claim, a
// recurring job, a setting) to a file:// target, and restores it on a
// fresh cluster pointed at the same target: the objects come back and
// the volume, restored from the backup the system backup made, reads
// every byte.
func TestASystemBackupOfOneClusterIsRestoredOnAnother(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	acrossClusters(t, root, func(e *framework.APIEnv) { e.SetBackupTarget(t, "file://"+root) })
}

// TestASystemBackupOnS3IsRestoredOnAnotherCluster is the same through a
// real S3 server (versitygw) and the credential Secret, in each cluster.
func TestASystemBackupOnS3IsRestoredOnAnotherCluster(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	acrossClusters(t, filepath.Join(srv.DataDir, srv.Bucket, "cluster"), func(e *framework.APIEnv) {
		e.PutSecret(t, "longhorn-backup-credential", srv.Credential())
		e.Call(t, "PUT", "/v1/settings/backup-target-credential-secret", `{"value":"longhorn-backup-credential"}`).Expect(t, 200)
		e.SetBackupTarget(t, srv.Target("cluster"))
	})
}

// acrossClusters runs the system backup on the package's cluster and the
// restore on a fresh one, both given the target by setTarget; root is
// where the target keeps its files (backupstore/ under it).
func acrossClusters(t *testing.T, root string, setTarget func(*framework.APIEnv)) {
	a := framework.NewAPIEnv(t)
	setTarget(a)
	a.Call(t, "POST", "/v1/volumes", `{"name":"data","size":"8Mi","numberOfReplicas":1}`).Expect(t, 200)
	// A detached volume: the system backup attaches it for its backup
	// and detaches it after.
	a.Call(t, "POST", "/v1/volumes", `{"name":"idle","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
	a.Call(t, "POST", "/v1/volumes/data?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := a.WaitVolume(t, "data", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x5a 0 2M", "write -P 0xc3 5M 1M", "flush")
	want := framework.DeviceContent(t, v["endpoint"].(string))
	// The volume's PV and a claim bound to it, as the CSI driver's
	// static provisioning makes them.
	ctx := context.Background()
	app := a.Cluster.NewPlainNamespace(t)
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + app},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Mi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: "longhorn-static",
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: app, Name: "data"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "driver.longhorn.io", VolumeHandle: "data"}}}}
	if _, err := a.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = a.Kube.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	storageClass := "longhorn-static"
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: app},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &storageClass,
			VolumeName: pv.Name, Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("8Mi")}}}}
	if _, err := a.Kube.CoreV1().PersistentVolumeClaims(app).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the claim bound to the volume's PV", func() (bool, error) {
		got, err := a.Kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.VolumeBound, nil
	})
	a.Call(t, "POST", "/v1/recurringjobs", `{"name":"nightly","task":"snapshot","cron":"0 1 * * *","retain":3,"groups":["default"]}`).Expect(t, 200)
	a.Call(t, "PUT", "/v1/settings/backup-concurrent-limit", `{"value":"3"}`).Expect(t, 200)
	// Two more backup targets: the fresh cluster has one at the second's
	// URL already, under another name.
	offsite, dr := "file://"+t.TempDir(), "file://"+t.TempDir()
	a.Call(t, "POST", "/v1/backuptargets", `{"name":"offsite","backupTargetURL":"`+offsite+`","pollInterval":"0"}`).Expect(t, 200)
	a.Call(t, "POST", "/v1/backuptargets", `{"name":"dr","backupTargetURL":"`+dr+`","pollInterval":"0"}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "the targets cached", func() (bool, error) {
		return a.Call(t, "GET", "/v1/backuptargets/dr", "").Status == 200 && a.Call(t, "GET", "/v1/backuptargets/offsite", "").Status == 200, nil
	})

	// As Longhorn's UI asks for it.
	a.Call(t, "POST", "/v1/systembackups", `{"name":"sb-1","volumeBackupPolicy":"if-not-present"}`).Expect(t, 200)
	framework.Eventually(t, 60*time.Second, "system backup sb-1 Ready", func() (bool, error) {
		sb := systemBackup(t, a, "sb-1")
		if sb != nil && sb.Status.State == longhorn.SystemBackupStateError {
			t.Fatalf("system backup failed: %+v", sb.Status.Conditions)
		}
		return sb != nil && sb.Status.State == longhorn.SystemBackupStateReady && sb.Status.Version != "", nil
	})
	if got := a.Call(t, "GET", "/v1/systembackups/sb-1", "").Expect(t, 200); got.Body["state"] != "Ready" || got.Body["version"] == "" || got.Body["createdAt"] == "" {
		t.Errorf("GET /v1/systembackups/sb-1: %s", got.Raw)
	}
	sb := systemBackup(t, a, "sb-1")
	dir := filepath.Join(root, "backupstore/system-backups", sb.Status.Version, "sb-1")
	for _, f := range []string{"system-backup.zip", "system-backup.cfg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("the archive is not in Longhorn's layout: %v", err)
		}
	}
	// The volume backup the policy asked for (the volume had none).
	framework.Eventually(t, 30*time.Second, "the backup the system backup made listed", func() (bool, error) {
		r := a.Call(t, "POST", "/v1/backupvolumes/data?action=backupList", "")
		if r.Status == 200 && len(framework.Names(r)) > 1 {
			t.Fatalf("backups %v, want the 1 the system backup made", framework.Names(r))
		}
		return r.Status == 200 && len(framework.Names(r)) == 1, nil
	})
	idle, err := a.LH.LonghornV1beta2().Volumes(a.NS).Get(ctx, "idle", metav1.GetOptions{})
	if err != nil || idle.Spec.NodeID != "" || idle.Annotations["longhorn.io/attached-by"] != "" {
		t.Fatalf("the detached volume was not detached again after its backup: %+v, %v", idle, err)
	}
	framework.Eventually(t, 30*time.Second, "the detached volume's backup listed", func() (bool, error) {
		r := a.Call(t, "POST", "/v1/backupvolumes/idle?action=backupList", "")
		return r.Status == 200 && len(framework.Names(r)) == 1, nil
	})
	// Written after the system backup: not in what is restored.
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x00 0 8M", "flush")

	b := secondCluster(t)
	setTarget(b)
	// The workload's namespace exists in the fresh cluster; its claim
	// does not.
	if _, err := b.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: app}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the target's system backup seen by the fresh cluster", func() (bool, error) {
		sb := systemBackup(t, b, "sb-1")
		return sb != nil && sb.Status.State == longhorn.SystemBackupStateReady && sb.Status.Version == systemBackup(t, a, "sb-1").Status.Version, nil
	})
	b.Call(t, "POST", "/v1/backuptargets", `{"name":"mine","backupTargetURL":"`+dr+`","pollInterval":"0"}`).Expect(t, 200)
	b.Call(t, "POST", "/v1/systemrestores", `{"name":"sr-1","systemBackup":"sb-1"}`).Expect(t, 200)
	framework.Eventually(t, 60*time.Second, "system restore sr-1 Completed", func() (bool, error) {
		sr, err := b.LH.LonghornV1beta2().SystemRestores(b.NS).Get(ctx, "sr-1", metav1.GetOptions{})
		if err == nil && sr.Status.State == longhorn.SystemRestoreStateError {
			t.Fatalf("system restore failed: %+v", sr.Status.Conditions)
		}
		return err == nil && sr.Status.State == longhorn.SystemRestoreStateCompleted, nil
	})
	job := b.Call(t, "GET", "/v1/recurringjobs/nightly", "").Expect(t, 200)
	if job.Body["cron"] != "0 1 * * *" || job.Body["task"] != "snapshot" {
		t.Errorf("restored job %v", job.Body)
	}
	if bt := b.Call(t, "GET", "/v1/backuptargets/offsite", "").Expect(t, 200); bt.Body["backupTargetURL"] != offsite {
		t.Errorf("restored target offsite: %s", bt.Raw)
	}
	b.Call(t, "GET", "/v1/backuptargets/dr", "").Expect(t, 404)
	if s := b.Call(t, "GET", "/v1/settings/backup-concurrent-limit", "").Expect(t, 200); s.Body["value"] != "3" {
		t.Errorf("restored setting backup-concurrent-limit = %v, want 3", s.Body["value"])
	}
	framework.Eventually(t, 60*time.Second, "the volume restored from its backup", func() (bool, error) {
		vol, err := b.LH.LonghornV1beta2().Volumes(b.NS).Get(ctx, "data", metav1.GetOptions{})
		return err == nil && vol.Spec.FromBackup != "" && vol.Status.RestoreInitiated && !vol.Status.RestoreRequired, nil
	})
	framework.Eventually(t, 60*time.Second, "the restored claim bound to the restored PV", func() (bool, error) {
		got, err := b.Kube.CoreV1().PersistentVolumeClaims(app).Get(ctx, "data", metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound && got.Spec.VolumeName == pv.Name, nil
	})
	framework.Eventually(t, 60*time.Second, "the detached volume restored from its backup", func() (bool, error) {
		vol, err := b.LH.LonghornV1beta2().Volumes(b.NS).Get(ctx, "idle", metav1.GetOptions{})
		return err == nil && vol.Spec.FromBackup != "" && vol.Status.RestoreInitiated && !vol.Status.RestoreRequired, nil
	})
	b.Call(t, "POST", "/v1/volumes/data?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	rv := b.WaitVolume(t, "data", "restored volume attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	if got := framework.DeviceContent(t, rv["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Fatal("the restored volume does not read the bytes written before the system backup")
	}

	// Deleting the SystemBackup (here, on the cluster that found it)
	// deletes its archive.
	b.Call(t, "DELETE", "/v1/systembackups/sb-1", "").Expect(t, 204)
	framework.Eventually(t, 30*time.Second, "the archive deleted with its SystemBackup", func() (bool, error) {
		_, zerr := os.Stat(filepath.Join(dir, "system-backup.zip"))
		_, cerr := os.Stat(filepath.Join(dir, "system-backup.cfg"))
		return os.IsNotExist(zerr) && os.IsNotExist(cerr) && systemBackup(t, b, "sb-1") == nil, nil
	})
}
