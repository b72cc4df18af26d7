package jobrun

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Every Nth run of a job with full-backup-interval N takes full backups,
// counting runs as Longhorn does (executionCount), whether the job's
// status already has the run's tick (the manager runner records it before
// the run) or not yet (the CronJob runner's mirror may lag the pod).
func TestBackupModeEveryNthRun(t *testing.T) {
	tick := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	job := func(interval string, count int64, recorded bool) *longhorn.RecurringJob {
		j := &longhorn.RecurringJob{Spec: longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeBackup}}
		if interval != "" {
			j.Spec.Parameters = map[string]string{"full-backup-interval": interval}
		}
		j.Status.ExecutionCount = count
		if recorded {
			j.Status.LastScheduleTime = &metav1.Time{Time: tick}
		} else if count > 0 {
			j.Status.LastScheduleTime = &metav1.Time{Time: tick.Add(-24 * time.Hour)}
		}
		return j
	}
	r := &Executor{Tick: tick}
	for _, tc := range []struct {
		name string
		job  *longhorn.RecurringJob
		want string
	}{
		{"no parameter", job("", 4, true), "incremental"},
		{"interval 0: never", job("0", 4, true), "incremental"},
		{"run 3 of every 3rd, recorded", job("3", 3, true), "full"},
		{"run 3 of every 3rd, the mirror behind", job("3", 2, false), "full"},
		{"run 4 of every 3rd", job("3", 4, true), "incremental"},
		{"the first run of a new job, not yet counted", job("1", 0, false), "full"},
		{"an interval that does not parse (refused at admission)", job("x", 3, true), "incremental"},
	} {
		if got := r.backupMode(tc.job); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
