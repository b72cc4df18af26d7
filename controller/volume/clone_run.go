package volume

import (
	"context"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// clones holds this node's clone runs, by the clone's name.
type clones struct {
	mu   sync.Mutex
	runs map[string]*cloneRun
}

type cloneRun struct {
	dataSource string // the spec.dataSource cloned
	source     string // the source volume
	started    bool   // the copy runs (else it waits for the source's engine)
	cancel     context.CancelFunc
	done       chan struct{} // closed when the copy ends, err then set
	err        error
	// A run that failed stays, with the error, until its retry is due:
	// the next run starts at retryAt, after attempts failed ones.
	failed   bool
	attempts int
	retryAt  time.Time
	// completed: the copy is done; the run stays until the volume's
	// status says so, so a status write that failed does not copy again.
	completed bool
}

// failureRetry is how long a clone or a restore waits after its first
// failure before it tries again; each failure doubles it, up to
// failureRetryMax.
const (
	failureRetry    = 2 * time.Second
	failureRetryMax = 5 * time.Minute
)

func failureBackoff(attempts int) time.Duration {
	d := failureRetry
	for i := 1; i < attempts && d < failureRetryMax; i++ {
		d *= 2
	}
	return min(d, failureRetryMax)
}

// runStep is where a volume's clone run stands, as step finds it.
type runStep int

const (
	// stepStart: no copy runs; it starts once the source's engine runs.
	stepStart runStep = iota
	// stepRunning: the copy runs.
	stepRunning
	// stepCompleted: the copy is done.
	stepCompleted
	// stepFailed: the copy failed since the last sync (reported once).
	stepFailed
	// stepRetryLater: the copy failed, and its retry is not due yet.
	stepRetryLater
)

// step finds, under the lock, the volume's run and where it stands,
// making a new one when there is none, when the volume's data source
// changed (it was deleted and made again), or when a failed one's retry
// is due. For stepFailed it returns the run's error.
func (cl *clones) step(v *longhorn.Volume, ds types.DataSource, now time.Time, log *logrus.Entry) (*cloneRun, runStep, error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.runs == nil {
		cl.runs = map[string]*cloneRun{}
	}
	r := cl.runs[v.Name]
	if r != nil && r.dataSource != v.Spec.DataSource {
		r.cancel()
		r = nil
	}
	switch {
	case r != nil && r.completed:
		return r, stepCompleted, nil
	case r != nil && r.failed && now.Before(r.retryAt):
		return r, stepRetryLater, nil
	case r != nil && r.failed:
		r = &cloneRun{dataSource: v.Spec.DataSource, source: ds.Volume, cancel: func() {}, done: make(chan struct{}), attempts: r.attempts}
		cl.runs[v.Name] = r
		log.WithFields(logrus.Fields{"volume": v.Name, "dataSource": v.Spec.DataSource, "attempt": r.attempts + 1}).Info("Trying the failed clone again")
	case r == nil:
		r = &cloneRun{dataSource: v.Spec.DataSource, source: ds.Volume, cancel: func() {}, done: make(chan struct{})}
		cl.runs[v.Name] = r
		log.WithFields(logrus.Fields{"volume": v.Name, "dataSource": v.Spec.DataSource, "snapshot": ds.Snapshot}).Info("Clone waits for the engine of its source")
	}
	if !r.started {
		return r, stepStart, nil
	}
	select {
	case <-r.done:
	default:
		return r, stepRunning, nil
	}
	if r.err != nil {
		r.failed, r.started = true, false
		r.attempts++
		r.retryAt = now.Add(failureBackoff(r.attempts))
		return r, stepFailed, r.err
	}
	r.completed = true
	return r, stepCompleted, nil
}

// start marks r started, with the cancel of its copy, unless it was
// stopped meanwhile (the volume is being deleted): false then.
func (cl *clones) start(volume string, r *cloneRun, cancel context.CancelFunc) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.runs[volume] != r {
		return false
	}
	r.started, r.cancel = true, cancel
	return true
}

// cloneSourceWanted reports whether a clone on this node waits for, or
// reads, volume's engine: the volume's sync keeps it running (without a
// frontend when the volume is detached) meanwhile.
func (c *Controller) cloneSourceWanted(volume string) bool {
	c.clones.mu.Lock()
	defer c.clones.mu.Unlock()
	for _, r := range c.clones.runs {
		if r.source == volume && !r.failed && !r.completed {
			return true
		}
	}
	return false
}

// cloning reports whether a clone of the volume waits, runs or waits to
// be tried again here: its volume syncs meanwhile, to show its progress
// and to start the retry when it is due.
func (c *Controller) cloning(volume string) bool {
	c.clones.mu.Lock()
	defer c.clones.mu.Unlock()
	return c.clones.runs[volume] != nil
}

// forgetClone drops the volume's completed clone run.
func (c *Controller) forgetClone(volume string) {
	c.clones.mu.Lock()
	defer c.clones.mu.Unlock()
	if r := c.clones.runs[volume]; r != nil && r.completed {
		delete(c.clones.runs, volume)
	}
}

// stopClone cancels the volume's clone, if one waits or runs, for a
// deletion, and lets its source's engine stop when nothing else needs it.
func (c *Controller) stopClone(volume string) {
	c.clones.mu.Lock()
	r := c.clones.runs[volume]
	delete(c.clones.runs, volume)
	c.clones.mu.Unlock()
	if r != nil {
		r.cancel()
		c.EnqueueVolume(r.source)
		c.Logger.WithFields(logrus.Fields{"volume": volume, "source": r.source}).Info("Stopped the volume's clone")
	}
}
