package api

import (
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// A backup volume is found by its volume and target: the name offsite's
// backup volume of vol would have is default's of a volume named so, and
// ?volumeName=vol&backupTargetName=offsite lists offsite's of vol alone.
func TestBackupVolumesFoundByVolumeAndTarget(t *testing.T) {
	taken := types.BackupVolumeObjectName("vol", "offsite")
	bv := func(name, volume, target string) *longhorn.BackupVolume {
		return &longhorn.BackupVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
			Spec: longhorn.BackupVolumeSpec{VolumeName: volume, BackupTargetName: target}}
	}
	second := types.BackupVolumeObjectNames("vol", "offsite")[1]
	s := newTestServer(t, bv(taken, taken, "default"), bv(second, "vol", "offsite"), bv("vol", "vol", "default"))
	eventually(t, "the backup volumes in the cache", func() bool { list, err := s.server.ds.ListBackupVolumesRO(); return err == nil && len(list) == 3 })
	for query, want := range map[string][]string{
		"?volumeName=vol&backupTargetName=offsite": {second},
		"?volumeName=vol":                          {"vol", second},
		"?volumeName=" + taken:                     {taken},
		"?backupTargetName=default":                {"vol", taken},
	} {
		code, body, raw := s.do(t, "GET", "/v1/backupvolumes"+query, "")
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", query, code, raw)
		}
		var got []string
		for _, d := range body["data"].([]any) {
			got = append(got, d.(map[string]any)["name"].(string))
		}
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", query, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: %v, want %v", query, got, want)
				break
			}
		}
	}
}
