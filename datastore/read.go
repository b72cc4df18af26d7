package datastore

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// CachedOrFresh reads the object name from the informer cache (cached,
// a GetXxxRO) and, when the cache does not have it, from the apiserver
// (fresh, a GetXxxFresh): one created a moment ago may not be in the
// cache yet, and only the apiserver says an object does not exist. A
// client that creates an object and reads it back at once (Longhorn's
// python client, a system-backup job's run) is never told 404 for it.
func CachedOrFresh[T any](ctx context.Context, name string, cached func(string) (T, error), fresh func(context.Context, string) (T, error)) (T, error) {
	obj, err := cached(name)
	if apierrors.IsNotFound(err) {
		return fresh(ctx, name)
	}
	return obj, err
}
