package volume

import (
	"errors"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Whether the volume's engine runs on this node, and what the Attach
// condition and a detached volume's status say, is decided by
// decideAttach, a pure function of what syncAttachment read and of the
// state its restore and clone are in (an attachView); syncAttachment
// applies it. The decision table is attach_plan_test.go.

// The volume's Attach condition: True once its engine runs on the node in
// spec.nodeID, False with the reason while it cannot; a volume with no
// node has none.
const (
	ConditionTypeAttach       = "Attach"
	ReasonReplicasOnOtherNode = "ReplicasOnOtherNode"
	ReasonReplicaDiskMissing  = "ReplicaDiskMissing"
	ReasonReplicaDataMissing  = "ReplicaDataMissing"
	ReasonEngineStartFailed   = "EngineStartFailed"
	// ReasonReplicaDataBehind: the replicas the engine would open are
	// behind one that failed (see ReasonAllReplicasFailed for salvage).
	ReasonReplicaDataBehind = "ReplicaDataBehind"
	// ReasonEngineRestarted is the Warning event of a volume whose engine
	// was started again after the instance manager it ran in stopped.
	ReasonEngineRestarted = "EngineRestarted"
)

// The volume's EngineRestarted condition: True, with the reason
// InstanceManagerStopped and the time in its message, once its engine was
// started again after the instance manager it ran in stopped (its
// frontend's clients saw I/O errors meanwhile); removed when the volume
// detaches. A volume whose engine was never lost has none.
const (
	ConditionTypeEngineRestarted = "EngineRestarted"
	ReasonInstanceManagerStopped = "InstanceManagerStopped"
)

// attachView is what syncAttachment knows of a volume this node owns
// once its restore and its clone are synced.
type attachView struct {
	volume *longhorn.Volume
	// nodeID is this node's.
	nodeID string
	// notLocal says why this node's engine may not open the replicas;
	// nil when it may.
	notLocal error
	// forClone: the volume is detached and a clone reads it.
	forClone bool
	// replicas counts the volume's replicas; failed are those marked
	// failed (spec.failedAt), which the engine does not open, and
	// allFailed says there are replicas and all of them are.
	replicas  int
	failed    []*longhorn.Replica
	allFailed bool
	// running: the engine runs here.
	running bool
	// ready: every replica's backing file is ready, or the engine runs
	// (it keeps the files it opened).
	ready bool
	// restoreRequired and cloneRequired: the volume still waits for its
	// backup, or for its clone, to be in it. restoring and cloning: the
	// engine runs for that restore or clone.
	restoreRequired bool
	cloneRequired   bool
	restoring       bool
	cloning         bool
}

// conditionChange is what a sync does to the Attach condition before the
// engine starts.
type conditionChange int

const (
	keepCondition conditionChange = iota
	removeCondition
	// setConditionFalse: False, with the plan's reason and message.
	setConditionFalse
)

// attachPlan is decideAttach's answer.
type attachPlan struct {
	// attach, reason and message: the Attach condition as the sync
	// finds things; an engine started then sets it True, or False with
	// why it did not start.
	attach          conditionChange
	reason, message string
	// run: the engine runs here, started when it does not; frontend: it
	// serves the volume on this node (a clone alone reads it without).
	run      bool
	frontend bool
	// Without run the volume is detached here: stop says its engine stops
	// (one restoring or cloning it runs on until that ends), and
	// robustness is the volume's.
	stop       bool
	robustness longhorn.VolumeRobustness
}

// decideAttach is what syncAttachment does with the engine and the
// Attach condition.
func decideAttach(v attachView) attachPlan {
	var p attachPlan
	spec := v.volume.Spec
	here := spec.NodeID == v.nodeID
	switch {
	case spec.NodeID == "":
		p.attach = removeCondition
	case here && v.notLocal != nil:
		p.attach, p.reason, p.message = setConditionFalse, ReasonReplicasOnOtherNode, v.notLocal.Error()
		var disk *diskNotHereError
		var notServed *notServedError
		if errors.As(v.notLocal, &disk) {
			p.reason = ReasonReplicaDiskMissing
		} else if errors.As(v.notLocal, &notServed) {
			p.reason = ReasonReplicasNotServed
		}
	case here && v.allFailed && !v.running:
		p.attach, p.reason, p.message = setConditionFalse, ReasonAllReplicasFailed, allFailedMessage(v.volume, v.failed, nil)
	}
	// An engine does not start on replicas that all failed; one already
	// running is not stopped for it.
	wanted := here || v.forClone
	p.run = wanted && v.notLocal == nil && v.replicas > 0 && !v.restoreRequired && !v.cloneRequired && v.ready && (!v.allFailed || v.running)
	if p.run {
		p.frontend = !spec.DisableFrontend && spec.NodeID != ""
		return p
	}
	p.stop = !v.restoring && !v.cloning
	p.robustness = longhorn.VolumeRobustnessUnknown
	if v.allFailed && spec.NodeID != "" {
		p.robustness = longhorn.VolumeRobustnessFaulted
	}
	return p
}
