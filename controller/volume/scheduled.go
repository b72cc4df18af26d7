package volume

import (
	"fmt"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// The volume's Scheduled condition, Longhorn's: True once every replica
// numberOfReplicas asks for is placed on a disk, False while some are
// not. Longhorn's UI offers Expand Volume only on a volume whose
// Scheduled condition is True.
const (
	ConditionTypeScheduled         = "Scheduled"
	ReasonReplicaSchedulingFailure = "ReplicaSchedulingFailure"
	ReasonReplicasScheduled        = "ReplicasScheduled"
)

// unscheduled is the replica scheduler's reason for the first replica it
// could not place (scheduler.Unschedulable), which the message carries.
func (c *Controller) setScheduledCondition(v *longhorn.Volume, vstatus *longhorn.VolumeStatus, replicas []*longhorn.Replica, unscheduled error) {
	placed := 0
	for _, r := range replicas {
		if r.Spec.DiskID != "" && r.DeletionTimestamp == nil {
			placed++
		}
	}
	if placed >= v.Spec.NumberOfReplicas {
		vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeScheduled, longhorn.ConditionStatusTrue, ReasonReplicasScheduled, "", c.clock.Now())
		return
	}
	msg := fmt.Sprintf("%d of the %d replicas numberOfReplicas asks for are placed on a disk", placed, v.Spec.NumberOfReplicas)
	if unscheduled != nil {
		msg += "; " + unscheduled.Error()
	}
	vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeScheduled, longhorn.ConditionStatusFalse, ReasonReplicaSchedulingFailure, msg, c.clock.Now())
}
