package jobrun

import (
	"time"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// retention is what a job keeps of the snapshots or backups it made: the
// newest few whatever their age, and, under the age-based policy
// (Longhorn v1.12's retentionPolicy and retainAge), also every one younger
// than maxAge.
type retention struct {
	newest int
	maxAge time.Duration // 0: the count alone decides
	now    time.Time
}

// jobRetention is the job's retention keeping at least the newest newest
// (retain, or retain-1 before a run takes its own). Under age-based, a
// job whose retainAge is not positive keeps everything: validation
// refuses that spec, and the safe reading of one that slips through is
// that nothing has expired.
func jobRetention(job *longhorn.RecurringJob, newest int, now time.Time) retention {
	p := retention{newest: newest, now: now}
	if job.Spec.RetentionPolicy == longhorn.RecurringJobRetentionPolicyAgeBased {
		p.maxAge = -1
		if job.Spec.RetainAge != nil && job.Spec.RetainAge.Duration > 0 {
			p.maxAge = job.Spec.RetainAge.Duration
		}
	}
	return p
}

// expired lists which of items, given by their creation times (RFC 3339)
// oldest first, are no longer kept. An item whose time does not parse is
// kept: its age is unknown, and only a known age deletes.
func (p retention) expired(created []string) []int {
	var out []int
	for i, c := range created {
		if i >= len(created)-p.newest {
			break
		}
		if p.maxAge == 0 {
			out = append(out, i)
			continue
		}
		if p.maxAge < 0 {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, c)
		if err == nil && p.now.Sub(t) > p.maxAge {
			out = append(out, i)
		}
	}
	return out
}
