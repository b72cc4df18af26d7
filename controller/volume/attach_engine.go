package volume

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// setAttachCondition sets the Attach condition in vstatus as plan says.
// An AllReplicasFailed condition that is new, or names other failures,
// is logged with failed, the volume's failed replicas.
func (c *Controller) setAttachCondition(v *longhorn.Volume, vstatus *longhorn.VolumeStatus, plan attachPlan, failed []*longhorn.Replica) {
	switch plan.attach {
	case removeCondition:
		vstatus.Conditions = slices.DeleteFunc(vstatus.Conditions, func(c longhorn.Condition) bool { return c.Type == ConditionTypeAttach })
	case setConditionFalse:
		if plan.reason == ReasonAllReplicasFailed {
			if cond := kit.GetCondition(vstatus.Conditions, ConditionTypeAttach); cond.Reason != plan.reason || cond.Message != plan.message {
				c.Logger.WithFields(logrus.Fields{"volume": v.Name, "node": v.Spec.NodeID, "failed": describeFailed(failed, nil)}).
					Error("Volume does not attach: every replica failed")
			}
		}
		vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeAttach, longhorn.ConditionStatusFalse, plan.reason, plan.message, c.clock.Now())
	}
}

// runEngine starts the volume's engine here unless it runs, and mirrors
// it into status (the Engine's) and vstatus (attached). It marks failed
// each replica the engine reports ERR and returns why (failures), and
// recordMirror, to be called with the resource version of the Engine
// once status is written ("" when it is not): the mirror is current from
// then on. An engine that does not start leaves its reason in the Engine's
// status, the failed replica's and the Attach condition, written before
// the error is returned.
func (c *Controller) runEngine(ctx context.Context, v *longhorn.Volume, e *longhorn.Engine, plan attachPlan, size int64,
	replicas []*longhorn.Replica, startDirs []instance.ReplicaDir, failedReplicas []*longhorn.Replica,
	status *longhorn.EngineStatus, vstatus *longhorn.VolumeStatus, failed map[string]bool, opts ...instance.StartOption,
) (failures map[string]volumeengine.Failure, recordMirror func(written string), err error) {
	run, err := c.instances.Start(v.Name, size, startDirs, plan.frontend, opts...)
	if err != nil {
		status.CurrentState = longhorn.InstanceStateError
		w := attachWrites{engine: e, status: status, volume: v, vstatus: vstatus}
		reason := ReasonEngineStartFailed
		var missing *instance.MissingDataError
		if errors.Is(err, volumeengine.ErrNoHealthyReplica) {
			reason = ReasonReplicaDataBehind
		}
		if errors.As(err, &missing) {
			// The Replicas' status is written then: the one whose data
			// is missing is in error.
			reason = ReasonReplicaDataMissing
			failed[missing.Replica] = true
			w.replicas, w.failed = replicas, failed
		}
		if plan.attach != removeCondition {
			vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeAttach, longhorn.ConditionStatusFalse, reason, err.Error(), c.clock.Now())
		}
		return nil, nil, c.writeFailure(ctx, w, err)
	}
	if run.Restarted != "" {
		c.Logger.WithField("volume", v.Name).Warn("Started the volume's engine again: " + run.Restarted)
		c.Metrics().EngineRestart()
		if c.recorder != nil {
			c.recorder.Event(v, corev1.EventTypeWarning, ReasonEngineRestarted, run.Restarted)
		}
		vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeEngineRestarted, longhorn.ConditionStatusTrue,
			ReasonInstanceManagerStopped, run.Restarted, c.clock.Now())
	}
	// A volume with no node (its engine runs for a clone) has no Attach
	// condition: set each sync after its removal, it would change its
	// transition time, and so the Volume's status, every second.
	if plan.attach != removeCondition {
		vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeAttach, longhorn.ConditionStatusTrue, "Attached", "", c.clock.Now())
	}
	host, port, _ := net.SplitHostPort(c.engineAddress)
	status.CurrentState, status.Started, status.OwnerID = longhorn.InstanceStateRunning, true, c.ownership.NodeID
	status.IP, status.StorageIP = host, host
	status.Port, _ = strconv.Atoi(port)
	status.Endpoint, status.InstanceManagerName = run.Endpoint, run.InstanceManager
	// The engine's version is its instance manager's image (Longhorn's
	// engine image): the UI says which volumes run an older one.
	status.CurrentImage, vstatus.CurrentImage = run.Image, run.Image
	c.expandEngine(v, size, run.Engine, status)
	// Read the count of ended backups first (an engine marks a backup
	// ended in its status before it counts it, and counts it before it
	// moves the generation), then the generation: a change while
	// mirroring moves it, so the next sync reads the engine again.
	finished := run.Engine.BackupsFinished()
	gen := run.Engine.Generation()
	var readAt time.Time
	// listChanged: the mirror changes the snapshot list; listOnly: it
	// changes nothing else, and so waits until engineListPace has
	// passed since the list was last written, alone or with other
	// changes. listDeferred: it waits; the status keeps the old list
	// and the generation is not recorded, so a later sync writes the
	// new one.
	listChanged, listOnly, listDeferred := false, false, false
	if !c.mirrors.current(v.Name, run.Engine, gen, e) {
		readAt = time.Now()
		c.mirrorEngine(run.Engine, status)
		// The replicas kept out of the engine are ERR in its status too.
		for _, r := range failedReplicas {
			if _, in := status.ReplicaModeMap[r.Name]; !in {
				status.ReplicaModeMap[r.Name] = longhorn.ReplicaModeERR
			}
		}
		listChanged = kit.StatusChanged(status.Snapshots, e.Status.Snapshots) || status.SnapshotsError != e.Status.SnapshotsError
		listOnly = listChanged && !changedBeyondList(status, &e.Status)
		if wait := c.mirrors.listWait(v.Name, readAt); listOnly && wait > 0 {
			status.Snapshots, status.SnapshotsError = e.Status.Snapshots, e.Status.SnapshotsError
			listDeferred = true
			c.Queue.AddAfter(c.ds.Namespace()+"/"+v.Name, wait)
		}
	}
	recordMirror = func(written string) {
		if written != "" && !listDeferred {
			c.mirrors.record(v.Name, run.Engine, gen, written)
		}
		if written != "" {
			c.mirrors.finishedAt(v.Name, finished)
		}
		// The pace spaces the mirrors that write. One that found the
		// status as it was (an engine started again after the
		// manager's restart) folds nothing: the changes that follow
		// it are mirrored once gathered.
		if !readAt.IsZero() && written != "" && written != e.ResourceVersion {
			c.mirrors.readAt(v.Name, readAt)
			if listChanged && !listDeferred {
				c.mirrors.listedAt(v.Name, readAt)
			}
		}
	}
	// What the engine serves: a frontend is started on a running
	// engine when asked for, never taken away from one.
	vstatus.State, vstatus.CurrentNodeID, vstatus.FrontendDisabled = longhorn.VolumeStateAttached, c.ownership.NodeID, run.Endpoint == ""
	vstatus.Robustness = robustness(status.ReplicaModeMap, v.Spec.NumberOfReplicas)
	// A replica the engine dropped, or started ERR, is marked failed.
	for name, mode := range status.ReplicaModeMap {
		if r := findReplica(replicas, name); mode == longhorn.ReplicaModeERR && r != nil && r.Spec.FailedAt == "" {
			failures = run.Engine.ReplicaFailures()
			break
		}
	}
	if err := c.recordFailures(ctx, v, replicas, failures); err != nil {
		return nil, nil, err
	}
	// The replicas the engine has open hold data from now on (a rebuilt
	// one from its join, WO).
	if err := c.markHealthy(ctx, replicas, func(r *longhorn.Replica) bool {
		mode, in := status.ReplicaModeMap[r.Name]
		return in && (mode == longhorn.ReplicaModeRW || mode == longhorn.ReplicaModeWO)
	}); err != nil {
		return nil, nil, err
	}
	if why := c.startRebuild(v, run.Engine, status, replicas); why != "" {
		c.Logger.WithField("volume", v.Name).Debug("Rebuild waits: " + why)
	}
	return failures, recordMirror, nil
}

// detachEngine stops the volume's engine here, as plan says, and sets
// status (the Engine's) and vstatus stopped and detached. It marks
// failed each replica the engine dropped, and returns why (failures).
func (c *Controller) detachEngine(ctx context.Context, v *longhorn.Volume, plan attachPlan, replicas []*longhorn.Replica,
	status *longhorn.EngineStatus, vstatus *longhorn.VolumeStatus,
) (failures map[string]volumeengine.Failure, err error) {
	// A replica the engine dropped is marked failed before the engine
	// stops: a stopped engine says nothing of it.
	if run, ok := c.instances.Get(v.Name); ok {
		failures = run.Engine.ReplicaFailures()
		if err := c.recordFailures(ctx, v, replicas, failures); err != nil {
			return nil, err
		}
		if plan.stop {
			// The Engine's snapshot list is what a detached volume's
			// snapshots are read from until it attaches again: it is the
			// engine's last, not a mirror a list-only change left behind
			// (engineListPace).
			mirrorSnapshots(run.Engine.Status(), status)
		}
	}
	if plan.stop {
		err := c.instances.Stop(v.Name)
		if errors.Is(err, instance.ErrUnreachable) {
			// Not known to be stopped: the volume is not said detached
			// while its engine may serve on.
			return nil, err
		}
		if err != nil {
			c.Logger.WithError(err).WithField("volume", v.Name).Warn("Engine stopped with an error")
		}
	}
	c.mirrors.forget(v.Name)
	status.CurrentState, status.Started, status.Endpoint, status.IP, status.StorageIP, status.Port = longhorn.InstanceStateStopped, false, "", "", "", 0
	status.InstanceManagerName, status.CurrentImage, vstatus.CurrentImage = "", "", ""
	status.ReplicaModeMap, status.PurgeStatus, status.BackupStatus = nil, nil, nil
	vstatus.State, vstatus.CurrentNodeID, vstatus.Robustness = longhorn.VolumeStateDetached, "", plan.robustness
	vstatus.Conditions = slices.DeleteFunc(vstatus.Conditions, func(c longhorn.Condition) bool { return c.Type == ConditionTypeEngineRestarted })
	return failures, nil
}
