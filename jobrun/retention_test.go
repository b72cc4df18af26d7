package jobrun

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestRetentionExpired(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) string { return now.Add(-d).Format(time.RFC3339Nano) }
	// Oldest first: 5 days, 3 days, 1 day, 1 hour old.
	items := []string{ago(120 * time.Hour), ago(72 * time.Hour), ago(24 * time.Hour), ago(time.Hour)}
	job := func(policy longhorn.RecurringJobRetentionPolicy, age time.Duration) *longhorn.RecurringJob {
		j := &longhorn.RecurringJob{Spec: longhorn.RecurringJobSpec{RetentionPolicy: policy}}
		if age != 0 {
			j.Spec.RetainAge = &metav1.Duration{Duration: age}
		}
		return j
	}
	for _, tc := range []struct {
		name   string
		job    *longhorn.RecurringJob
		newest int
		items  []string
		want   string
	}{
		{"count-based keeps the newest retain", job("", 0), 2, items, "[0 1]"},
		{"count-based ignores retainAge", job(longhorn.RecurringJobRetentionPolicyCountBased, 48*time.Hour), 3, items, "[0]"},
		{"count-based with retain 0 keeps nothing", job("", 0), 0, items, "[0 1 2 3]"},
		{"age-based keeps what is younger than the age", job(longhorn.RecurringJobRetentionPolicyAgeBased, 48*time.Hour), 0, items, "[0 1]"},
		{"age-based keeps the newest retain however old", job(longhorn.RecurringJobRetentionPolicyAgeBased, 30*time.Minute), 2, items, "[0 1]"},
		{"age-based with every item young keeps all", job(longhorn.RecurringJobRetentionPolicyAgeBased, 200*time.Hour), 0, items, "[]"},
		{"age-based with no age keeps everything", job(longhorn.RecurringJobRetentionPolicyAgeBased, 0), 0, items, "[]"},
		{"an item whose time does not parse is kept", job(longhorn.RecurringJobRetentionPolicyAgeBased, time.Hour), 0,
			[]string{"yesterday", ago(72 * time.Hour), ago(time.Minute)}, "[1]"},
		{"an item from the future is kept", job(longhorn.RecurringJobRetentionPolicyAgeBased, time.Hour), 0,
			[]string{now.Add(time.Hour).Format(time.RFC3339)}, "[]"},
		{"more kept than there are items", job("", 0), 10, items, "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fmt.Sprint(jobRetention(tc.job, tc.newest, now).expired(tc.items))
			if got != tc.want {
				t.Errorf("expired %s, want %s", got, tc.want)
			}
		})
	}
}
