package recurringjob

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// settledJobs remembers, by key, the resourceVersion of each job whose
// last sync found it owned by this node, Ready, and wrote nothing. The
// RecurringJob informer has no periodic resync: a resync hands every job
// to each of the informer's handlers (the controller, the runner, the
// metrics, the API's streams), four deliveries per job per period, of
// which only the controller has a use, and for few jobs. Instead the
// controller sweeps its cache at that period and queues the jobs that
// are not settled, which is what a resync was for here.
// Everything that could change a settled job's outcome still queues it:
// a change of it (a new resourceVersion), of its CronJob (the CronJob
// handler), or of a setting (enqueueAll forgets every job). A job this
// node does not own, or that is not Ready (an invalid spec, a CronJob
// name taken by someone else), or whose sync failed, is never settled:
// the sweep is how a peer's job is taken over when the peer goes down,
// how a name freed outside the manager is noticed, and how a job whose
// retries ran out is tried again.
type settledJobs struct {
	mu sync.Mutex
	rv map[string]string
}

func (s *settledJobs) remember(key, resourceVersion string) {
	if resourceVersion == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rv == nil {
		s.rv = map[string]string{}
	}
	s.rv[key] = resourceVersion
}

func (s *settledJobs) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rv, key)
}

func (s *settledJobs) forgetAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv = nil
}

func (s *settledJobs) settled(key, resourceVersion string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return resourceVersion != "" && s.rv[key] == resourceVersion
}

// jobEventHandler queues a job on every add, change and delete, and on a
// resync unless the job is settled.
func (c *Controller) jobEventHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    c.Enqueue,
		UpdateFunc: c.onJobUpdate,
		DeleteFunc: func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.settled.forget(key)
			}
			c.Enqueue(obj)
		},
	}
}

func (c *Controller) onJobUpdate(old, cur any) {
	o, ok1 := old.(*longhorn.RecurringJob)
	n, ok2 := cur.(*longhorn.RecurringJob)
	if ok1 && ok2 && o.ResourceVersion == n.ResourceVersion {
		if key, err := cache.MetaNamespaceKeyFunc(n); err == nil && c.settled.settled(key, n.ResourceVersion) {
			return
		}
	}
	c.Enqueue(cur)
}

// sweep queues every cached job that is not settled (see settledJobs).
func (c *Controller) sweep() {
	jobs, err := c.ds.ListRecurringJobsRO()
	if err != nil {
		c.Logger.WithError(err).Warn("Cannot list recurring jobs to look at them again")
		return
	}
	for _, job := range jobs {
		key := c.ds.Namespace() + "/" + job.Name
		if !c.settled.settled(key, job.ResourceVersion) {
			c.Queue.Add(key)
		}
	}
}

// Run runs the controller's workers and, every ResyncPeriod, its sweep.
func (c *Controller) Run(ctx context.Context, workers int) error {
	period := c.cfg.ResyncPeriod
	if period <= 0 {
		period = 30 * time.Second
	}
	go wait.Until(c.sweep, period, ctx.Done())
	return c.Base.Run(ctx, workers)
}
