package volume

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// syncReplicaStatus sets each Replica's state from the engine: running
// while the engine runs and uses it, error once the engine dropped it or
// could not open it (failed) and for as long as it is marked failed
// (spec.failedAt, whose Failed condition says why, from failures), stopped
// otherwise.
func (c *Controller) syncReplicaStatus(ctx context.Context, replicas []*longhorn.Replica, engine *longhorn.EngineStatus, failed map[string]bool, failures map[string]volumeengine.Failure) error {
	for _, r := range replicas {
		st := r.Status.DeepCopy()
		st.OwnerID = c.ownership.NodeID
		st.Conditions = c.failedCondition(r, st.Conditions, failures)
		switch {
		case failed[r.Name], r.Spec.FailedAt != "":
			st.CurrentState, st.Started = longhorn.InstanceStateError, false
		case engine.CurrentState != longhorn.InstanceStateRunning:
			st.CurrentState, st.Started = longhorn.InstanceStateStopped, false
		case engine.ReplicaModeMap[r.Name] == longhorn.ReplicaModeRW:
			st.CurrentState, st.Started = longhorn.InstanceStateRunning, true
		default:
			st.CurrentState = longhorn.InstanceStateError
		}
		if !kit.StatusChanged(st, &r.Status) {
			continue
		}
		updated := r.DeepCopy()
		updated.Status = *st
		if _, err := c.ds.UpdateReplicaStatus(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("update status of replica %s: %w", r.Name, err)
		}
	}
	return nil
}

func (c *Controller) updateVolumeStatus(ctx context.Context, v *longhorn.Volume, vstatus *longhorn.VolumeStatus) error {
	if !kit.StatusChanged(vstatus, &v.Status) {
		return nil
	}
	updated := v.DeepCopy()
	updated.Status = *vstatus
	if _, err := c.ds.UpdateVolumeStatus(ctx, updated); err != nil {
		return err
	}
	if vstatus.State != v.Status.State {
		c.Logger.WithFields(logrus.Fields{"volume": v.Name, "state": vstatus.State, "node": vstatus.CurrentNodeID}).Info("Volume state changed")
	}
	return nil
}

func robustness(modes map[string]longhorn.ReplicaMode, want int) longhorn.VolumeRobustness {
	healthy := 0
	for _, m := range modes {
		if m == longhorn.ReplicaModeRW {
			healthy++
		}
	}
	switch {
	case healthy == 0:
		return longhorn.VolumeRobustnessFaulted
	case healthy < want:
		return longhorn.VolumeRobustnessDegraded
	}
	return longhorn.VolumeRobustnessHealthy
}
