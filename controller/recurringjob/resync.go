package recurringjob

import (
	"sync"

	"k8s.io/client-go/tools/cache"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// settledJobs remembers, by key, the resourceVersion of each job whose
// last sync found it owned by this node, Ready, and wrote nothing. The
// informers' periodic resync redelivers every job unchanged; for a
// settled one that sync would only validate it again and find nothing
// to do (with 10,000 jobs, most of an idle manager's CPU), so the
// redelivery is not queued. Everything that could change the outcome
// still queues the job: a change of it (a new resourceVersion), of its
// CronJob (the CronJob handler), or of a setting (enqueueAll forgets
// every job). A job this node does not own, or that is not Ready (an
// invalid spec, a CronJob name taken by someone else), is never settled:
// the resync is how a peer's job is taken over when the peer goes down,
// and how a name freed outside the manager is noticed.
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
		DeleteFunc: func(obj interface{}) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				c.settled.forget(key)
			}
			c.Enqueue(obj)
		},
	}
}

func (c *Controller) onJobUpdate(old, cur interface{}) {
	o, ok1 := old.(*longhorn.RecurringJob)
	n, ok2 := cur.(*longhorn.RecurringJob)
	if ok1 && ok2 && o.ResourceVersion == n.ResourceVersion {
		if key, err := cache.MetaNamespaceKeyFunc(n); err == nil && c.settled.settled(key, n.ResourceVersion) {
			return
		}
	}
	c.Enqueue(cur)
}
