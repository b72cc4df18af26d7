package volume

import (
	"context"

	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// attachWrites are the statuses one syncAttachment writes, each at most
// once and in this order: the Engine's (status, when not nil), the
// Replicas' (of replicas, from status, failed and failures; none when
// replicas is nil), the Volume's (vstatus, when not nil). A write is
// made only when the status changed.
type attachWrites struct {
	engine   *longhorn.Engine
	status   *longhorn.EngineStatus
	replicas []*longhorn.Replica
	failed   map[string]bool
	failures map[string]volumeengine.Failure
	volume   *longhorn.Volume
	vstatus  *longhorn.VolumeStatus
}

// writeAttachment makes the writes of a sync that went through, and stops
// at the first that fails. written is the resource version of the Engine
// that holds status ("" when its write failed).
func (c *Controller) writeAttachment(ctx context.Context, w attachWrites) (written string, err error) {
	if w.status != nil {
		if written, err = c.writeEngineStatus(ctx, w.engine, w.status); err != nil {
			return "", err
		}
	}
	if w.replicas != nil {
		if err := c.syncReplicaStatus(ctx, w.replicas, w.status, w.failed, w.failures); err != nil {
			return written, err
		}
	}
	if w.vstatus != nil {
		return written, c.updateVolumeStatus(ctx, w.volume, w.vstatus)
	}
	return written, nil
}

// writeFailure makes the writes of a sync that fails with cause, which
// say why: each is tried whatever became of the one before, a lost one
// is logged, and cause is returned (the sync backs off and tries again).
func (c *Controller) writeFailure(ctx context.Context, w attachWrites, cause error) error {
	log := c.Logger.WithField("volume", w.volume.Name).WithField("cause", cause.Error())
	if w.status != nil {
		if _, err := c.writeEngineStatus(ctx, w.engine, w.status); err != nil {
			log.WithError(err).Warn("Could not write why the sync failed into the Engine's status")
		}
	}
	if w.replicas != nil {
		if err := c.syncReplicaStatus(ctx, w.replicas, w.status, w.failed, w.failures); err != nil {
			log.WithError(err).Warn("Could not write why the sync failed into the Replicas' status")
		}
	}
	if w.vstatus != nil {
		if err := c.updateVolumeStatus(ctx, w.volume, w.vstatus); err != nil {
			log.WithError(err).Warn("Could not write why the sync failed into the Volume's status")
		}
	}
	return cause
}
