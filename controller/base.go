// Package controller holds the manager's controllers. Each one is a
// level-triggered loop over one resource, built on baseController: a
// rate-limited workqueue of namespace/name keys, a number of workers, a wait
// for the informer caches, and a clean stop.
package controller

import (
	"context"
	"fmt"
	"sync"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/cadence-storage/longhorn-manager/internal/panics"
)

// maxRetries is how many times a key is retried with backoff before it is
// dropped; the next informer event or resync brings it back.
const maxRetries = 15

// syncFunc reconciles the object behind one queue key.
type syncFunc func(ctx context.Context, key string) error

// baseController is the queue-and-workers machinery every controller shares.
type baseController struct {
	name    string
	logger  *logrus.Entry
	queue   workqueue.TypedRateLimitingInterface[string]
	sync    syncFunc
	synced  []cache.InformerSynced
	metrics *Metrics
}

func newBaseController(name string, logger *logrus.Entry, metrics *Metrics, sync syncFunc, synced ...cache.InformerSynced) *baseController {
	c := &baseController{
		name:   name,
		logger: logger.WithField("controller", name),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name},
		),
		sync:    sync,
		synced:  synced,
		metrics: metrics,
	}
	metrics.watchQueue(name, c.queue.Len)
	return c
}

// enqueue adds the object's key; it is the usual informer event handler.
func (c *baseController) enqueue(obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("%s: cannot get key of %#v: %w", c.name, obj, err))
		return
	}
	c.queue.Add(key)
}

// eventHandler enqueues the object on every add, update and delete.
func (c *baseController) eventHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, cur interface{}) { c.enqueue(cur) },
		DeleteFunc: c.enqueue,
	}
}

// Run waits for the caches, starts the workers and blocks until ctx ends
// and every worker has finished its current item.
func (c *baseController) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()

	c.logger.Info("Starting controller")
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
	c.logger.Info("Stopping controller")
	// Shutting the queue down makes Get return false once the workers are
	// done with their current items, so the wait below is bounded by one
	// sync per worker.
	c.queue.ShutDownWithDrain()
	wg.Wait()
	return nil
}

func (c *baseController) processNextWorkItem(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	// Done tells the queue this worker no longer holds the key, so another
	// add of the same key can be processed again (never in parallel).
	defer c.queue.Done(key)

	err := c.syncRecovered(ctx, key)
	c.metrics.observe(c.name, err)
	c.handleErr(ctx, err, key)
	return true
}

// syncRecovered runs the sync of key and turns a panic in it into an error,
// logged with the key and the stack: the key is retried with backoff like
// any failed sync, and the worker goes on with the other keys. (client-go's
// HandleCrash would panic again.)
func (c *baseController) syncRecovered(ctx context.Context, key string) (err error) {
	defer panics.Recover(c.logger.WithField("key", key), &err)
	return c.sync(ctx, key)
}

func (c *baseController) handleErr(ctx context.Context, err error, key string) {
	if ctx.Err() != nil {
		// Stopping: the failure is the cancelled context, not the object.
		return
	}
	if err == nil {
		// Forget resets the key's backoff, so the next failure of a key that
		// recovered starts with a short delay again.
		c.queue.Forget(key)
		return
	}
	log := c.logger.WithField("key", key).WithError(err)
	if c.queue.NumRequeues(key) < maxRetries {
		if apierrors.IsConflict(err) {
			// The cache had not seen our own last write yet: routine.
			log.Debug("Conflict while syncing, will retry")
		} else {
			log.Warn("Failed to sync, will retry")
		}
		c.queue.AddRateLimited(key)
		return
	}
	log.Error("Dropping key after too many failed syncs")
	c.queue.Forget(key)
}
