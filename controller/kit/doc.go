// Package kit is what every controller of the manager is built on, in the
// shape of Kubernetes' CronJob controller v2: a Base holding a rate-limited
// workqueue of namespace/name keys and its workers, a Sync that returns a
// Result (when to look again) and an error (retry with backoff), and the
// small rules every controller applies the same way: which node owns an
// object (Ownership), finalizers, conditions, "did the status change"
// (StatusChanged), queue keys, events and metrics.
//
// A controller in a domain package embeds *Base, registers its informer
// handlers with EventHandler or Enqueue, and returns from its Sync:
//
//	kit.Result{}, nil                         done until the next event
//	kit.Result{RequeueAfter: d}, nil          look again after d (a poll, a deadline)
//	kit.Result{}, err                         failed: retried with backoff
//	kit.Result{RequeueAfter: d}, err          failed, retried; and back by d whatever the retries do
package kit
