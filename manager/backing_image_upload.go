package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// uploadPollInterval is how often the wait for an upload server reads
// the cache.
const uploadPollInterval = 200 * time.Millisecond

// BackingImageUploadServer waits, at most wait, until the data source of
// an upload image has its server up and waiting for the file, and
// answers the server's host:port. An image that does not take uploads, or
// whose upload was received or failed already, is refused at once.
func (m *VolumeManager) BackingImageUploadServer(ctx context.Context, name string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		addr, pending, err := m.uploadServerOnce(ctx, name)
		if err != nil || addr != "" {
			return addr, err
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%w: the upload server of backing image %s is not up after %s (%s); try again shortly", ErrUnavailable, name, wait, pending)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(uploadPollInterval):
		}
	}
}

// uploadServerOnce reads the cache once: the address when the server
// waits for the upload, else what it is waiting for, or why an upload
// can never be taken.
func (m *VolumeManager) uploadServerOnce(ctx context.Context, name string) (addr, pending string, err error) {
	bi, err := m.GetBackingImage(name)
	if errors.Is(err, ErrNotFound) {
		// An upload sent right after the image's creation may come before
		// the cache has the image: only the API says it does not exist.
		if _, ferr := m.ds.GetBackingImageFresh(ctx, name); ferr == nil {
			return "", "the backing image was just created", nil
		}
	}
	if err != nil {
		return "", "", err
	}
	switch {
	case bi.Spec.SourceType != longhorn.BackingImageDataSourceTypeUpload:
		return "", "", invalid("action upload: backing image %s has sourceType %s; only sourceType upload takes a file", name, bi.Spec.SourceType)
	case bi.DeletionTimestamp != nil:
		return "", "", conflict("backing image %s is being deleted", name)
	case bi.Status.UUID == "":
		return "", "the backing image has no UUID yet", nil
	}
	for disk, f := range bi.Status.DiskFileStatusMap {
		if f != nil && f.State == longhorn.BackingImageStateReady {
			return "", "", conflict("backing image %s is ready on disk %s already: it takes one upload", name, disk)
		}
	}
	bids, err := m.ds.GetBackingImageDataSourceRO(name)
	if apierrors.IsNotFound(err) || (err == nil && bids.Spec.UUID != bi.Status.UUID) {
		return "", "its data source is not created yet", nil
	}
	if err != nil {
		return "", "", err
	}
	if bids.Spec.FileTransferred {
		return "", "", conflict("backing image %s received its upload already", name)
	}
	switch st := bids.Status.CurrentState; st {
	case longhorn.BackingImageStatePending:
		if bids.Status.IP != "" {
			return bids.Status.IP, "", nil
		}
		return "", "the data source server has no address yet", nil
	case longhorn.BackingImageStateInProgress, longhorn.BackingImageStateReadyForTransfer, longhorn.BackingImageStateReady:
		return "", "", conflict("backing image %s: the data source is %s, it takes one upload", name, st)
	case longhorn.BackingImageStateFailed:
		return "", "", conflict("backing image %s: the data source failed (%s); delete the image and create it again to upload anew", name, bids.Status.Message)
	default:
		state := string(st)
		if state == "" {
			state = "not started"
		}
		msg := "the data source server is " + state
		if bids.Status.Message != "" {
			msg += ": " + bids.Status.Message
		}
		return "", msg, nil
	}
}
