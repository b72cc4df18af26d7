package api

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// cachedOrFresh reads the object name from the informer cache and, when
// the cache does not have it, from the apiserver: one created a moment
// ago (by this API or anyone) may not be in the cache yet, and only the
// apiserver says an object does not exist. A client that creates an
// object and reads it back at once (Longhorn's python client, a
// system-backup job's run) is never told 404 for it.
func cachedOrFresh[T any](ctx context.Context, name string, cached func(string) (T, error), fresh func(context.Context, string) (T, error)) (T, error) {
	obj, err := cached(name)
	if apierrors.IsNotFound(err) {
		return fresh(ctx, name)
	}
	return obj, err
}
