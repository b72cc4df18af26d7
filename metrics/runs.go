package metrics

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Results of a recurring job's tick, the values of the result label.
const (
	ResultSucceeded = "succeeded"
	ResultFailed    = "failed"
	ResultSkipped   = "skipped"
	ResultMissed    = "missed"
	ResultForbidden = "forbidden"
)

var runResults = []string{ResultSucceeded, ResultFailed, ResultSkipped, ResultMissed, ResultForbidden}

// runDurationBuckets bound the run duration histogram, in seconds: a
// snapshot job takes seconds, a backup job of many volumes hours.
var runDurationBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400}

// finishedRun is one tick of a job seen ending, by a change of the job's
// status.
type finishedRun struct {
	result   string
	duration time.Duration // zero when not known (the run was never seen active)
}

// finishedRuns reads the ticks that ended between two statuses of a job,
// written by either runner:
//   - a run that leaves status.active, or a new lastScheduleTime that never
//     showed in status.active (a CronJob run quicker than the mirror), ended;
//     it succeeded when lastSuccessfulTime moved in the same write (both
//     runners write the two together), and failed otherwise;
//   - a lastSkipped that moves is a tick not run: skipped when the write
//     also records a new suspend (the controller's skipImmediately),
//     forbidden when a run was active (concurrency Forbid), missed
//     otherwise (past startingDeadlineSeconds).
//
// now is when the change is seen; a run's duration runs from its start
// (or its tick, when the runner records no start) to now.
func finishedRuns(old, cur *longhorn.RecurringJobStatus, now time.Time) []finishedRun {
	var out []finishedRun
	succeeded := after(cur.LastSuccessfulTime, old.LastSuccessfulTime)
	result := ResultFailed
	if succeeded {
		result = ResultSucceeded
	}
	for _, run := range old.Active {
		if containsRun(cur.Active, run) {
			continue
		}
		start := run.ScheduledTime.Time
		if run.StartTime != nil {
			start = run.StartTime.Time
		}
		var d time.Duration
		if !start.IsZero() && now.After(start) {
			d = now.Sub(start)
		}
		out = append(out, finishedRun{result: result, duration: d})
	}
	if after(cur.LastScheduleTime, old.LastScheduleTime) && len(out) == 0 && !tickActive(cur.Active, cur.LastScheduleTime.Time) {
		// Started and ended between two looks of the CronJob mirror.
		out = append(out, finishedRun{result: result})
	}
	if after(cur.LastSkipped, old.LastSkipped) {
		switch {
		case !sameBool(old.ObservedSuspend, cur.ObservedSuspend):
			out = append(out, finishedRun{result: ResultSkipped})
		case len(old.Active) > 0:
			out = append(out, finishedRun{result: ResultForbidden})
		default:
			out = append(out, finishedRun{result: ResultMissed})
		}
	}
	return out
}

func after(a, b *metav1.Time) bool {
	return a != nil && (b == nil || a.After(b.Time))
}

func sameBool(a, b *bool) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func containsRun(runs []longhorn.RecurringJobRun, run longhorn.RecurringJobRun) bool {
	for _, r := range runs {
		if r.Runner == run.Runner && r.Name == run.Name && r.ScheduledTime.Equal(&run.ScheduledTime) {
			return true
		}
	}
	return false
}

func tickActive(runs []longhorn.RecurringJobRun, tick time.Time) bool {
	for _, r := range runs {
		if r.ScheduledTime.Time.Equal(tick) {
			return true
		}
	}
	return false
}

// jobRuns is what this manager counted of one job's runs.
type jobRuns struct {
	finished map[string]uint64
	// The run duration histogram: counts per bucket (not cumulative).
	buckets []uint64
	count   uint64
	sum     float64
	volumes map[string]uint64 // volumes done, by result, over all runs
}

// newRunVolumes is the volumes of a run whose last-run annotation a job
// gained: a new tick, or the same tick run again (a resumed run).
func newRunVolumes(old, cur map[string]string) (types.RecurringJobRunVolumes, bool) {
	before, after := old[types.AnnotationRecurringJobLastRun], cur[types.AnnotationRecurringJobLastRun]
	if after == before {
		return types.RecurringJobRunVolumes{}, false
	}
	return types.ParseRecurringJobLastRun(after)
}

// runCounts holds the counts of every job, by name.
type runCounts struct {
	mu   sync.Mutex
	jobs map[string]*jobRuns
}

func (c *runCounts) job(name string) *jobRuns {
	if c.jobs == nil {
		c.jobs = map[string]*jobRuns{}
	}
	j := c.jobs[name]
	if j == nil {
		j = &jobRuns{finished: map[string]uint64{}, buckets: make([]uint64, len(runDurationBuckets)), volumes: map[string]uint64{}}
		c.jobs[name] = j
	}
	return j
}

func (c *runCounts) add(name string, runs []finishedRun) {
	if len(runs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.job(name)
	for _, r := range runs {
		j.finished[r.result]++
		if r.duration <= 0 {
			continue
		}
		s := r.duration.Seconds()
		j.count++
		j.sum += s
		for i, b := range runDurationBuckets {
			if s <= b {
				j.buckets[i]++
				break
			}
		}
	}
}

func (c *runCounts) addVolumes(name string, v types.RecurringJobRunVolumes) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.job(name)
	j.volumes[ResultSucceeded] += uint64(v.Succeeded)
	j.volumes[ResultFailed] += uint64(v.Failed)
	j.volumes[ResultSkipped] += uint64(v.Skipped)
}

// forget drops the counts of the jobs keep rejects: a deleted job leaves
// no series.
func (c *runCounts) forget(keep func(string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.jobs {
		if !keep(name) {
			delete(c.jobs, name)
		}
	}
}
