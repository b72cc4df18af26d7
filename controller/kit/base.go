package kit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/cadence-storage/longhorn-manager/internal/panics"
)

// maxRetries is how many failed syncs of a key are routine retries. A key
// is never dropped: Snapshot and RecurringJob informers have no resync, so
// a dropped key whose object still needs work (a deletion the apiserver
// refuses for a while) would never be finished. Past maxRetries each
// failure is logged as an error, and the backoff keeps growing to the
// rate limiter's cap (1000 s).
const maxRetries = 15

// Result tells the Base when to reconcile a key again, besides the retries
// of a failed sync. The zero Result waits for the next informer event.
type Result struct {
	// RequeueAfter, when positive, brings the key back after that long:
	// a poll, or a deadline the object's state depends on.
	RequeueAfter time.Duration
}

// Soonest is the Result that brings the key back first; a zero
// RequeueAfter means "not at all" and loses to any other.
func Soonest(results ...Result) Result {
	var out Result
	for _, r := range results {
		if r.RequeueAfter > 0 && (out.RequeueAfter == 0 || r.RequeueAfter < out.RequeueAfter) {
			out = r
		}
	}
	return out
}

// SyncFunc reconciles the object behind one queue key.
type SyncFunc func(ctx context.Context, key string) (Result, error)

// Base is the queue-and-workers machinery every controller shares.
type Base struct {
	name string
	// Logger carries the controller's name.
	Logger *logrus.Entry
	// Queue holds namespace/name keys (cache.MetaNamespaceKeyFunc's).
	Queue   workqueue.TypedRateLimitingInterface[string]
	sync    SyncFunc
	synced  []cache.InformerSynced
	metrics *Metrics
}

// NewBase returns the machinery of the controller called name, which
// reconciles a key with sync once the informers behind synced are synced.
// metrics may be nil.
func NewBase(name string, logger *logrus.Entry, metrics *Metrics, sync SyncFunc, synced ...cache.InformerSynced) *Base {
	c := &Base{
		name:   name,
		Logger: logger.WithField("controller", name),
		Queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name},
		),
		sync:    sync,
		synced:  synced,
		metrics: metrics,
	}
	metrics.watchQueue(name, c.Queue.Len)
	return c
}

// CountIn counts the reconciles in m, without exporting the queue's depth:
// for a Base made again for each leadership term, whose depth gauge
// would be registered twice.
func (c *Base) CountIn(m *Metrics) { c.metrics = m }

// Metrics are what the controller counts in; nil when it counts nothing
// (Metrics' methods take a nil receiver).
func (c *Base) Metrics() *Metrics { return c.metrics }

// Name is the controller's name, as its logs and metrics show it.
func (c *Base) Name() string { return c.name }

// Enqueue adds the object's key (a tombstone's too); it is the usual
// informer event handler.
func (c *Base) Enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("%s: cannot get key of %#v: %w", c.name, obj, err))
		return
	}
	c.Queue.Add(key)
}

// EventHandler enqueues the object on every add, update and delete.
func (c *Base) EventHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    c.Enqueue,
		UpdateFunc: func(_, cur any) { c.Enqueue(cur) },
		DeleteFunc: c.Enqueue,
	}
}

// Run waits for the caches, starts the workers and blocks until ctx ends
// and every worker has finished its current item.
func (c *Base) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	defer c.Queue.ShutDown()

	c.Logger.Info("Starting controller")
	if !cache.WaitForNamedCacheSync(c.name, ctx.Done(), c.synced...) {
		return fmt.Errorf("%s: caches did not sync before stop", c.name)
	}

	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNextWorkItem(ctx) {
			}
		}()
	}
	<-ctx.Done()
	c.Logger.Info("Stopping controller")
	// Shutting the queue down makes Get return false once the workers are
	// done with their current items, so the wait below is bounded by one
	// sync per worker.
	c.Queue.ShutDownWithDrain()
	wg.Wait()
	return nil
}

func (c *Base) processNextWorkItem(ctx context.Context) bool {
	key, quit := c.Queue.Get()
	if quit {
		return false
	}
	// Done tells the queue this worker no longer holds the key, so another
	// add of the same key can be processed again (never in parallel).
	defer c.Queue.Done(key)

	result, err := c.syncRecovered(ctx, key)
	c.metrics.observe(c.name, err)
	c.handleResult(ctx, key, result, err)
	return true
}

// syncRecovered runs the sync of key and turns a panic in it into an error,
// logged with the key and the stack: the key is retried with backoff like
// any failed sync, and the worker goes on with the other keys. (client-go's
// HandleCrash would panic again.)
func (c *Base) syncRecovered(ctx context.Context, key string) (result Result, err error) {
	defer panics.Recover(c.Logger.WithField("key", key), &err)
	return c.sync(ctx, key)
}

// handleResult retries a failed key with backoff, and otherwise resets its
// backoff; either way a key with result.RequeueAfter set comes back after
// that long.
func (c *Base) handleResult(ctx context.Context, key string, result Result, err error) {
	if ctx.Err() != nil {
		// Stopping: the failure is the cancelled context, not the object.
		return
	}
	if err != nil && result.RequeueAfter > 0 {
		// A deadline returned with an error is kept: the key comes back
		// by then even if its retries are dropped.
		c.Queue.AddAfter(key, result.RequeueAfter)
	}
	if err == nil {
		// Forget resets the key's backoff, so the next failure of a key that
		// recovered starts with a short delay again.
		c.Queue.Forget(key)
		if result.RequeueAfter > 0 {
			c.Queue.AddAfter(key, result.RequeueAfter)
		}
		return
	}
	log := c.Logger.WithField("key", key).WithError(err)
	tries := c.Queue.NumRequeues(key)
	switch {
	case tries >= maxRetries:
		log.WithField("failedSyncs", tries+1).Error("Still failing to sync, will retry with a longer backoff")
	case apierrors.IsConflict(err):
		// The cache had not seen our own last write yet: routine.
		log.Debug("Conflict while syncing, will retry")
	default:
		log.Warn("Failed to sync, will retry")
	}
	c.Queue.AddRateLimited(key)
}
