package jobrun

import (
	"context"
	"fmt"

	"github.com/cadence-storage/longhorn-manager/client"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// filesystemTrim runs the filesystem-trim task on one volume: the
// trimFilesystem action (fstrim where a pod mounts the volume), then a
// purge, so the space of snapshots already removed goes back too, as
// Longhorn's task does. The filesystem is the one a pod mounts, so the run
// attaches nothing: a detached volume, or one from which no filesystem is
// mounted (a raw block volume, one attached for a backup), is skipped
// with the reason.
func (r *Executor) filesystemTrim(ctx context.Context, vol *client.Volume) (string, error) {
	if vol.State != string(longhorn.VolumeStateAttached) {
		return fmt.Sprintf("the volume is %s: a filesystem is trimmed where a pod mounts the attached volume", vol.State), nil
	}
	if err := r.API.TrimFilesystem(ctx, vol.Name); err != nil {
		if client.IsNoMountedFilesystem(err) {
			return fmt.Sprintf("no filesystem to trim: %v", err), nil
		}
		return "", err
	}
	return "", r.API.Purge(ctx, vol.Name)
}
