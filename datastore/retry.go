package datastore

import (
	"k8s.io/client-go/util/retry"
)

// RetryOnConflict runs update until it stops failing with a conflict, with
// client-go's default backoff. update must re-read the object each time (a
// GET, not the cache, for the retry to make progress) and apply its change
// to that fresh copy, so a conflict is resolved against the newest version
// rather than overwriting it.
func RetryOnConflict(update func() error) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, update)
}
