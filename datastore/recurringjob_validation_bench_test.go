package datastore

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Validation runs on every API write and every controller sync of a job,
// so its cost matters most for schedules whose next tick is far away.
func BenchmarkValidateRecurringJob(b *testing.B) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct{ name, cron string }{
		{"hourly", "0 * * * *"},
		{"leap-day", "0 0 29 2 *"},
		{"never-fires", "0 0 30 2 *"},
	} {
		job := &longhorn.RecurringJob{
			ObjectMeta: metav1.ObjectMeta{Name: "job"},
			Spec:       longhorn.RecurringJobSpec{Task: "snapshot", Cron: c.cron, Retain: 3, Concurrency: 10, Groups: []string{"default"}},
		}
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = ValidateRecurringJob(job, 100, now)
			}
		})
	}
}

func BenchmarkFixupRecurringJobLabels(b *testing.B) {
	labels := map[string]string{"app": "db", "tier": "gold", "recurring-job.longhorn.io/nightly": "enabled"}
	for i := 0; i < b.N; i++ {
		_, _ = FixupRecurringJobLabels(labels)
	}
}
