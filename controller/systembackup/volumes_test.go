package systembackup

import (
	"strings"
	"testing"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/systembackup"
)

func TestThePolicyDecidesWhichVolumesAreBackedUp(t *testing.T) {
	for _, tc := range []struct {
		policy string
		newest string
		want   bool
	}{
		{"", "", true},
		{"", "backup-1", false},
		{"if-not-present", "", true},
		{"if-not-present", "backup-1", false},
		{"always", "", true},
		{"always", "backup-1", true},
		{"disabled", "", false},
		{"disabled", "backup-1", false},
	} {
		p, err := systembackup.ParsePolicy(tc.policy)
		if err != nil {
			t.Fatal(err)
		}
		if got := needsBackup(p, tc.newest); got != tc.want {
			t.Errorf("policy %q, newest backup %q: needsBackup = %v, want %v", tc.policy, tc.newest, got, tc.want)
		}
	}
	if _, err := systembackup.ParsePolicy("sometimes"); err == nil || !strings.Contains(err.Error(), "volumeBackupPolicy") {
		t.Errorf("systembackup.ParsePolicy(sometimes) = %v, want an error naming volumeBackupPolicy", err)
	}
	if p, _ := systembackup.ParsePolicy(""); p != longhorn.SystemBackupCreateVolumeBackupPolicyIfNotPresent {
		t.Errorf("the empty policy is %q, want Longhorn's default if-not-present", p)
	}
}
