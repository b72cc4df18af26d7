package node

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// heartbeatFresh reports whether a node's heartbeat Lease was renewed
// within its duration, and when it goes stale.
func heartbeatFresh(lease *coordinationv1.Lease, now time.Time) (fresh bool, staleAt time.Time) {
	if lease == nil || lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return false, time.Time{}
	}
	staleAt = lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	return now.Before(staleAt), staleAt
}

// nodeReadyCondition is the Ready condition a node's heartbeat implies.
func nodeReadyCondition(conds []longhorn.Condition, lease *coordinationv1.Lease, now time.Time) []longhorn.Condition {
	fresh, staleAt := heartbeatFresh(lease, now)
	switch {
	case fresh:
		return kit.SetCondition(conds, longhorn.ConditionTypeReady, longhorn.ConditionStatusTrue,
			longhorn.NodeConditionReasonManagerRunning, "", now)
	case lease == nil:
		return kit.SetCondition(conds, longhorn.ConditionTypeReady, longhorn.ConditionStatusFalse,
			longhorn.NodeConditionReasonManagerPodMissing, "no heartbeat from the node's manager", now)
	default:
		return kit.SetCondition(conds, longhorn.ConditionTypeReady, longhorn.ConditionStatusFalse,
			longhorn.NodeConditionReasonManagerStale,
			fmt.Sprintf("the node's manager has not renewed its heartbeat since %s", staleAt.UTC().Format(time.RFC3339)), now)
	}
}

// diskProbe is the result of probing one disk of this node.
type diskProbe struct {
	info *diskInfo
	err  error
}

// diskStatus computes a disk's status from its spec, its last status and
// what the probe found.
func diskStatus(spec longhorn.DiskSpec, old *longhorn.DiskStatus, probe diskProbe, now time.Time) *longhorn.DiskStatus {
	st := &longhorn.DiskStatus{Type: spec.Type}
	if old != nil {
		st = old.DeepCopy()
		st.Type = spec.Type
	}
	if probe.err != nil {
		st.StorageAvailable, st.StorageMaximum = 0, 0
		st.Conditions = kit.SetCondition(st.Conditions, longhorn.ConditionTypeReady, longhorn.ConditionStatusFalse,
			longhorn.DiskConditionReasonDiskFilesystem, probe.err.Error(), now)
		st.Conditions = kit.SetCondition(st.Conditions, longhorn.ConditionTypeSchedulable, longhorn.ConditionStatusFalse,
			longhorn.DiskConditionReasonDiskFilesystem, "the disk is not ready", now)
		return st
	}
	info := probe.info
	if st.DiskUUID != "" && st.DiskUUID != info.Config.DiskUUID {
		msg := fmt.Sprintf("the disk at %s has UUID %s, but this disk was registered with UUID %s: another disk is mounted there",
			spec.Path, info.Config.DiskUUID, st.DiskUUID)
		st.Conditions = kit.SetCondition(st.Conditions, longhorn.ConditionTypeReady, longhorn.ConditionStatusFalse,
			longhorn.DiskConditionReasonDiskUUIDMismatch, msg, now)
		st.Conditions = kit.SetCondition(st.Conditions, longhorn.ConditionTypeSchedulable, longhorn.ConditionStatusFalse,
			longhorn.DiskConditionReasonDiskUUIDMismatch, "the disk is not ready", now)
		return st
	}
	st.DiskUUID = info.Config.DiskUUID
	st.StorageMaximum = info.StorageMaximum
	st.StorageAvailable = info.StorageAvail
	st.Conditions = kit.SetCondition(st.Conditions, longhorn.ConditionTypeReady, longhorn.ConditionStatusTrue,
		longhorn.DiskConditionReasonDiskReady, "", now)
	schedulable, reason, msg := true, "", ""
	switch {
	case !spec.AllowScheduling:
		schedulable, reason, msg = false, "DiskSchedulingDisabled", "scheduling is disabled on the disk"
	case info.StorageAvail <= spec.StorageReserved:
		schedulable, reason, msg = false, "DiskPressure", fmt.Sprintf("available %d bytes is not above the reserved %d bytes", info.StorageAvail, spec.StorageReserved)
	}
	st.Conditions = kit.SetCondition(st.Conditions, longhorn.ConditionTypeSchedulable, kit.BoolStatus(schedulable), reason, msg, now)
	return st
}
