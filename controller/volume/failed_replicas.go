package volume

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/controller/replica"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// A failed replica (spec.failedAt set) missed writes the volume
// acknowledged: the engine does not open it again, and its data stays on
// its disk. While the volume is attached a new replica is placed in its
// place and rebuilt from a healthy one (replacement.go).
const (
	// ConditionTypeReplicaFailed: the volume has failed replicas, named
	// in the message; absent when it has none.
	ConditionTypeReplicaFailed = "ReplicaFailed"
	ReasonReplicaFailed        = "ReplicaFailed"
	// ReasonAllReplicasFailed: the Attach condition of a volume whose
	// replicas all failed; it does not attach.
	ReasonAllReplicasFailed = "AllReplicasFailed"
	// reasonFailedAtSet: spec.failedAt was set without a reason the
	// engine gave (by hand, or a write of the reason was lost).
	reasonFailedAtSet = "FailedAtSet"
	// reasonFailedAtCleared: spec.failedAt was cleared (a salvage).
	reasonFailedAtCleared = "FailedAtCleared"
)

// replicaFailedAtHandler syncs a volume when one of its replicas' spec.failedAt
// changes: a failed replica leaves the volume, a salvaged one (cleared by
// a user) may attach it. Other changes of a Replica are the volume
// controller's own writes, and cause no sync.
func (c *Controller) replicaFailedAtHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*longhorn.Replica)
			n, ok2 := obj.(*longhorn.Replica)
			// Marked failed or not, served elsewhere or not (an engine
			// here waits for a replica of another node to be served,
			// remote_replicas.go), or its data deleted on its node for a
			// volume being deleted (delete.go waits for it).
			if ok1 && ok2 && n.Spec.VolumeName != "" && (o.Spec.FailedAt != n.Spec.FailedAt || replica.ServedAddress(o) != replica.ServedAddress(n) ||
				replica.DataDeleted(o) != replica.DataDeleted(n)) {
				c.EnqueueVolume(n.Spec.VolumeName)
			}
		},
	}
}

// recordFailures marks failed, in spec.failedAt, each replica the engine
// reports ERR that is not marked yet. The written objects replace those in
// replicas; syncReplicaStatus then writes the Failed condition, with the
// reason from failures.
func (c *Controller) recordFailures(ctx context.Context, v *longhorn.Volume, replicas []*longhorn.Replica, failures map[string]volumeengine.Failure) error {
	for i, r := range replicas {
		f, failed := failures[r.Name]
		if !failed || r.Spec.FailedAt != "" {
			continue
		}
		updated := r.DeepCopy()
		updated.Spec.FailedAt = c.clock.Now().UTC().Format(time.RFC3339)
		written, err := c.ds.UpdateReplica(ctx, updated)
		if apierrors.IsNotFound(err) {
			continue
		}
		if apierrors.IsConflict(err) {
			// The cache is behind a write: the engine still reports the
			// replica, and a sync soon records it.
			c.Queue.AddAfter(c.ds.Namespace()+"/"+v.Name, time.Second)
			continue
		}
		if err != nil {
			return fmt.Errorf("record that replica %s failed: %w", r.Name, err)
		}
		replicas[i] = written
		c.Logger.WithFields(logrus.Fields{"volume": v.Name, "replica": r.Name, "failedAt": updated.Spec.FailedAt, "reason": failureReason(f), "error": f.Why}).
			Error("Replica marked failed: the engine does not open it again until it is rebuilt from a healthy replica")
	}
	return nil
}

func failureReason(f volumeengine.Failure) string {
	if f.Behind {
		return longhorn.ReplicaConditionReasonDataBehind
	}
	return longhorn.ReplicaConditionReasonIOError
}

// failedCondition returns the replica's conditions with Failed set from
// spec.failedAt and, when the engine says why, from failures.
func (c *Controller) failedCondition(r *longhorn.Replica, conds []longhorn.Condition, failures map[string]volumeengine.Failure) []longhorn.Condition {
	have := kit.GetCondition(conds, longhorn.ReplicaConditionTypeFailed)
	switch f, known := failures[r.Name]; {
	case r.Spec.FailedAt == "" && have.Status == longhorn.ConditionStatusTrue:
		return kit.SetCondition(conds, longhorn.ReplicaConditionTypeFailed, longhorn.ConditionStatusFalse, reasonFailedAtCleared,
			"spec.failedAt was cleared: the engine opens the replica again, and keeps it out if its data is behind another replica's", c.clock.Now())
	case r.Spec.FailedAt == "":
		return conds
	case known:
		// What the engine says now: a replica that failed again after a
		// salvage has the new reason.
		return kit.SetCondition(conds, longhorn.ReplicaConditionTypeFailed, longhorn.ConditionStatusTrue, failureReason(f), f.Why, c.clock.Now())
	case have.Status != longhorn.ConditionStatusTrue:
		return kit.SetCondition(conds, longhorn.ReplicaConditionTypeFailed, longhorn.ConditionStatusTrue, reasonFailedAtSet,
			"spec.failedAt is "+r.Spec.FailedAt, c.clock.Now())
	}
	return conds
}

// describeFailed names each failed replica, when it failed and why.
func describeFailed(failed []*longhorn.Replica, failures map[string]volumeengine.Failure) string {
	parts := make([]string, 0, len(failed))
	for _, r := range failed {
		why := kit.GetCondition(r.Status.Conditions, longhorn.ReplicaConditionTypeFailed).Message
		if f, ok := failures[r.Name]; ok {
			why = f.Why
		}
		if why == "" {
			why = "no reason recorded"
		}
		parts = append(parts, fmt.Sprintf("replica %s failed at %s (%s)", r.Name, r.Spec.FailedAt, why))
	}
	return strings.Join(parts, "; ")
}

// setReplicaFailedCondition says on the volume which of its replicas
// failed and are kept out of its engine, and removes the condition when
// none is.
func (c *Controller) setReplicaFailedCondition(vstatus *longhorn.VolumeStatus, failed []*longhorn.Replica, failures map[string]volumeengine.Failure) {
	if len(failed) == 0 {
		vstatus.Conditions = slices.DeleteFunc(vstatus.Conditions, func(c longhorn.Condition) bool { return c.Type == ConditionTypeReplicaFailed })
		return
	}
	msg := describeFailed(failed, failures) + ". A failed replica missed writes; the engine does not open it, and while the volume is attached a new replica is placed and rebuilt from a healthy one in its place"
	vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeReplicaFailed, longhorn.ConditionStatusTrue, ReasonReplicaFailed, msg, c.clock.Now())
}

// allFailedMessage says why a volume whose replicas all failed does not
// attach, and how to salvage it.
func allFailedMessage(v *longhorn.Volume, failed []*longhorn.Replica, failures map[string]volumeengine.Failure) string {
	return fmt.Sprintf("volume %s does not attach: every replica failed: %s. To salvage the volume, clear spec.failedAt of all its replicas: "+
		"the engine then opens the one whose data is the latest (the last to fail), and keeps the others out", v.Name, describeFailed(failed, failures))
}
