//go:build e2e

package backup

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore/s3test"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Two BackupTargets on two real S3 servers: one volume's backups to each
// are independent (each in its own target, with its own objects, and a
// restore from each reads every byte of what was backed up there), and
// stopping one server leaves backups to the other running and the first
// target's objects in place.
func TestBackupsToTwoS3Targets(t *testing.T) {
	t.Parallel()
	home, away := s3test.Start(t), s3test.Start(t)
	e := framework.NewAPIEnv(t)
	e.PutSecret(t, "s3-home", home.Credential())
	e.PutSecret(t, "s3-away", away.Credential())
	homeURL, awayURL := home.Target(""), away.Target("offsite")
	e.Call(t, "PUT", "/v1/settings/backup-target-credential-secret", `{"value":"s3-home"}`).Expect(t, 200)
	e.SetBackupTarget(t, homeURL)
	e.Call(t, "POST", "/v1/backuptargets", `{"name":"offsite","backupTargetURL":"`+awayURL+`","credentialSecret":"s3-away","pollInterval":"300"}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "offsite in the API's cache", func() (bool, error) {
		return e.Call(t, "GET", "/v1/backuptargets/offsite", "").Status == 200, nil
	})
	// A volume naming a target that does not exist is refused, naming
	// the field.
	e.Call(t, "POST", "/v1/volumes", `{"name":"src","size":"8Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/src?action=updateBackupTargetName", `{"backupTargetName":"nowhere"}`).Expect(t, 400, "backupTargetName")

	e.Call(t, "POST", "/v1/volumes/src?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "src", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	endpoint := v["endpoint"].(string)

	// One snapshot backed up to default (home), another to offsite.
	framework.QemuIO(t, endpoint, "write -P 0x11 1M 2M", "flush")
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)
	homeBackup := e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 200).Body["name"].(string)
	homeBackupURL := e.CompletedBackupURL(t, homeBackup)

	framework.QemuIO(t, endpoint, "write -P 0x22 4M 1M", "flush")
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"s2"}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/src?action=updateBackupTargetName", `{"backupTargetName":"offsite"}`).Expect(t, 200, `"backupTargetName":"offsite"`)
	awayBackup := e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s2"}`).Expect(t, 200).Body["name"].(string)
	awayBackupURL := e.CompletedBackupURL(t, awayBackup)

	if !strings.HasPrefix(homeBackupURL, homeURL+"?") || !strings.HasPrefix(awayBackupURL, awayURL+"?") {
		t.Fatalf("backup URLs %s and %s, want in %s and %s", homeBackupURL, awayBackupURL, homeURL, awayURL)
	}
	lh := e.LH.LonghornV1beta2()
	for backup, target := range map[string]string{homeBackup: "default", awayBackup: "offsite"} {
		b, err := lh.Backups(e.NS).Get(context.Background(), backup, metav1.GetOptions{})
		if err != nil || b.Status.BackupTargetName != target || b.Labels[types.LabelBackupTarget] != target {
			t.Fatalf("Backup %s: %+v, %v; want in %s", backup, b, err, target)
		}
	}
	awayBV := types.BackupVolumeObjectName("src", "offsite")
	framework.Eventually(t, 30*time.Second, "each target's BackupVolume lists its own backup only", func() (bool, error) {
		h := e.Call(t, "POST", "/v1/backupvolumes/src?action=backupList", "")
		a := e.Call(t, "POST", "/v1/backupvolumes/"+awayBV+"?action=backupList", "")
		if h.Status != 200 || a.Status != 200 {
			return false, nil
		}
		hd, ad := h.Body["data"].([]any), a.Body["data"].([]any)
		return len(hd) == 1 && len(ad) == 1 && hd[0].(map[string]any)["name"] == homeBackup && ad[0].(map[string]any)["name"] == awayBackup &&
			ad[0].(map[string]any)["backupTargetName"] == "offsite", nil
	})

	// A restore from each reads every byte of what went there.
	s1 := make([]byte, 8<<20)
	copy(s1[1<<20:3<<20], bytes.Repeat([]byte{0x11}, 2<<20))
	s2 := bytes.Clone(s1)
	copy(s2[4<<20:5<<20], bytes.Repeat([]byte{0x22}, 1<<20))
	for name, tc := range map[string]struct {
		url  string
		want []byte
	}{"from-home": {homeBackupURL, s1}, "from-away": {awayBackupURL, s2}} {
		e.Call(t, "POST", "/v1/volumes", `{"name":"`+name+`","size":"8Mi","numberOfReplicas":1,"fromBackup":"`+tc.url+`"}`).Expect(t, 200)
		framework.Eventually(t, 60*time.Second, name+" restored", func() (bool, error) {
			vol, err := lh.Volumes(e.NS).Get(context.Background(), name, metav1.GetOptions{})
			return err == nil && vol.Status.RestoreInitiated && !vol.Status.RestoreRequired, nil
		})
		e.Call(t, "POST", "/v1/volumes/"+name+"?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
		r := e.WaitVolume(t, name, "restored volume attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
		if got := framework.DeviceContent(t, r["endpoint"].(string)); !bytes.Equal(got, tc.want) {
			t.Errorf("%s: the restored volume differs from the snapshot backed up", name)
		}
	}

	// home's server stops: a backup to offsite still completes, and
	// home's objects stay, its BackupVolume saying why it cannot be read.
	home.Stop(t)
	framework.QemuIO(t, endpoint, "write -P 0x33 6M 512k", "flush")
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"s3"}`).Expect(t, 200)
	third := e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s3"}`).Expect(t, 200).Body["name"].(string)
	if url := e.CompletedBackupURL(t, third); !strings.HasPrefix(url, awayURL+"?") {
		t.Fatalf("the backup after home stopped is at %s, want in %s", url, awayURL)
	}
	e.Call(t, "POST", "/v1/backupvolumes/src?action=backupVolumeSync", "").Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "home's BackupVolume says it cannot be read", func() (bool, error) {
		r := e.Call(t, "GET", "/v1/backupvolumes/src", "")
		msgs, _ := r.Body["messages"].(map[string]any)
		m, _ := msgs["backupTarget"].(string)
		return r.Status == 200 && m != "", nil
	})
	for _, backup := range []string{homeBackup, awayBackup, third} {
		if _, err := lh.Backups(e.NS).Get(context.Background(), backup, metav1.GetOptions{}); err != nil {
			t.Errorf("Backup %s after home's server stopped: %v", backup, err)
		}
	}
}
