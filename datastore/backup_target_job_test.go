package datastore

import (
	"testing"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// A job's backup goes to the job's target, else the volume's, else
// default.
func TestJobBackupTarget(t *testing.T) {
	for _, tc := range []struct{ job, volume, want string }{
		{"offsite", "local", "offsite"},
		{"", "local", "local"},
		{"", "", "default"},
		{"offsite", "", "offsite"},
	} {
		job := &longhorn.RecurringJob{Spec: longhorn.RecurringJobSpec{BackupTargetName: tc.job}}
		v := &longhorn.Volume{Spec: longhorn.VolumeSpec{BackupTargetName: tc.volume}}
		if got := JobBackupTarget(job, v); got != tc.want {
			t.Errorf("job %q, volume %q: %q, want %q", tc.job, tc.volume, got, tc.want)
		}
	}
}
