package volume

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// syncAttachment starts the engine where the volume is attached, stops it
// when it is detached, and mirrors the engine into the Engine's and the
// Volume's status. Whether the engine runs here is decideAttach's
// (attach_plan.go); runEngine and detachEngine apply it.
func (c *Controller) syncAttachment(ctx context.Context, v *longhorn.Volume) error {
	// written is the Engine's resource version once its status is current.
	var written string
	existing, err := c.ds.ListVolumeReplicasRO(v.Name)
	if err != nil {
		return err
	}
	// A detached volume's engine runs here, without a frontend, while a
	// clone reads it.
	forClone := v.Spec.NodeID == "" && c.cloneSourceWanted(v.Name)
	// A volume restored or made a clone is written from this node's own
	// disks only; another reaches the replicas of other nodes.
	notLocal := c.replicasNotLocal(v, existing, forClone)
	attachTo := v.Spec.NodeID
	if forClone {
		attachTo = c.ownership.NodeID
	}
	if notLocal != nil {
		attachTo = ""
	}
	// A clone is made on the node that holds its source's replicas, where
	// the source's engine runs: never elsewhere, where it could not read it.
	if len(existing) == 0 && cloneRequired(v) {
		if node := c.cloneSourceNode(v); node != "" && node != c.ownership.NodeID {
			msg := fmt.Sprintf("the replicas of its source (dataSource %s) are on node %s, whose manager makes the clone; it is not up", v.Spec.DataSource, node)
			vstatus := v.Status.DeepCopy()
			vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeClone, longhorn.ConditionStatusFalse, ReasonCloning, msg, c.clock.Now())
			if _, err := c.writeAttachment(ctx, attachWrites{volume: v, vstatus: vstatus}); err != nil {
				return err
			}
			return fmt.Errorf("volume %s: %s", v.Name, msg)
		}
	}
	replicas, e, unscheduled, err := c.ensureObjects(ctx, v, attachTo)
	if err != nil {
		return err
	}
	if notLocal == nil {
		notLocal = c.replicasNotLocal(v, replicas, forClone)
	}
	status := e.Status.DeepCopy()
	vstatus := v.Status.DeepCopy()
	c.setScheduledCondition(v, vstatus, replicas, unscheduled)
	// size: what the volume is to have, spec.size unless the disk has no
	// room for the growth, which stays refused (expansionRefused).
	size, refused, err := c.expansionTarget(v, replicas)
	if err != nil {
		return err
	}
	if err := c.syncReplicaSizes(ctx, size, replicas); err != nil {
		return err
	}
	if e, err = c.syncEngineSize(ctx, e, size); err != nil {
		return err
	}
	c.recordExpansionRefusal(v, status, refused)
	// failed: the replicas an engine start found without their data.
	failed := map[string]bool{}
	// failures: why the running engine does not use a replica.
	var failures map[string]volumeengine.Failure
	backing, waiting, err := c.backingFiles(ctx, v, replicas)
	if err != nil {
		return err
	}
	if v.Spec.BackingImage != "" {
		if waiting != "" {
			vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeWaitForBackingImage, longhorn.ConditionStatusTrue, "WaitForBackingImage", waiting, c.clock.Now())
		} else {
			vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeWaitForBackingImage, longhorn.ConditionStatusFalse, "BackingImageReady", "", c.clock.Now())
		}
	}
	// The replicas of other nodes are reached where they are served; an
	// engine to start here leaves out those whose node is down, and a
	// volume that holds data opens no replica that was never opened: that
	// one is rebuilt into the running engine (replacement.go).
	opened := openable(replicas)
	remotes, notServed := c.remoteReplicas(v, opened)
	if _, running := c.instances.Get(v.Name); notServed != nil && !running && notLocal == nil && (v.Spec.NodeID == c.ownership.NodeID || forClone) {
		marked, err := c.leaveUnreachable(ctx, v, replicas)
		if err != nil {
			return err
		}
		if marked {
			opened = openable(replicas)
			remotes, notServed = c.remoteReplicas(v, opened)
		}
	}
	dirs, startDirs := replicaDirs(c.localOnly(opened), backing)
	failedReplicas := markedFailed(replicas)
	// A replica awaiting its rebuild is no replica to start on.
	allFailed := len(opened) > 0 && len(failedReplicas) == len(opened)
	_, running := c.instances.Get(v.Name)
	// An engine already running keeps its open backing files; one that is
	// not starts only once every replica's file is ready.
	ready := waiting == "" || running
	// canOpen: the engine may open the replicas here, for a restore or a
	// clone.
	canOpen := ready && notLocal == nil && !allFailed && len(remotes) == 0 && notServed == nil
	restoring, err := c.syncRestoreStatus(ctx, v, e, replicas, dirs, status, vstatus, canOpen)
	if err != nil {
		return err
	}
	cloning, err := c.syncCloneStatus(ctx, v, vstatus, replicas, dirs, canOpen)
	if err != nil {
		return err
	}
	// An engine that runs is never stopped for a replica no longer
	// served (it drops that replica itself); one that does not run waits
	// until every replica elsewhere is served.
	if notLocal == nil && !running {
		notLocal = notServed
	}
	plan := decideAttach(attachView{
		volume:          v,
		nodeID:          c.ownership.NodeID,
		notLocal:        notLocal,
		forClone:        forClone,
		replicas:        len(replicas),
		failed:          failedReplicas,
		allFailed:       allFailed,
		running:         running,
		ready:           ready,
		restoreRequired: vstatus.RestoreRequired,
		cloneRequired:   cloneRequired(&longhorn.Volume{Spec: v.Spec, Status: *vstatus}),
		restoring:       restoring,
		cloning:         cloning,
	})
	c.setAttachCondition(v, vstatus, plan, failedReplicas)
	if plan.run {
		var recordMirror func(written string)
		var opts []instance.StartOption
		if !running && len(remotes) > 0 {
			// A start over remote replicas takes the volume's next term
			// first (one of local replicas only needs none: their lock
			// keeps any other engine out).
			if wait := c.remoteStarts.wait(v.Name, c.clock.Now()); wait > 0 {
				return fmt.Errorf("volume %s: its last start over remote replicas failed; the next in %s", v.Name, wait.Round(time.Millisecond))
			}
			if v, err = c.takeTerm(ctx, v); err != nil {
				return err
			}
			vstatus.Term = v.Status.Term
			opts = append(opts, instance.WithTerm(string(v.UID), uint64(v.Status.Term)), instance.WithRemoteReplicas(remotes...))
		}
		failures, recordMirror, err = c.runEngine(ctx, v, e, plan, size, replicas, startDirs, failedReplicas, status, vstatus, failed, opts...)
		if len(opts) > 0 {
			c.remoteStarts.done(v.Name, err, c.clock.Now())
		}
		if err != nil {
			return err
		}
		defer func() { recordMirror(written) }()
	} else if failures, err = c.detachEngine(ctx, v, plan, replicas, status, vstatus); err != nil {
		return err
	}
	// Replicas marked failed in this sync are named too.
	c.setReplicaFailedCondition(vstatus, markedFailed(replicas), failures)
	written, err = c.writeAttachment(ctx, attachWrites{engine: e, status: status, replicas: replicas, failed: failed, failures: failures, volume: v, vstatus: vstatus})
	return err
}

// replicaDirs are the replicas' directories the engine opens (dirs: not
// failed ones), and those it starts with (startDirs: dirs and the failed
// replicas, which the engine does not open but compares the others with:
// none behind them is RW).
func replicaDirs(replicas []*longhorn.Replica, backing map[string]*replica.BackingFile) (dirs, startDirs []instance.ReplicaDir) {
	dirs = make([]instance.ReplicaDir, 0, len(replicas))
	for _, r := range replicas {
		// Only a replica whose data was never created may be created: any
		// other is opened, and its data missing is an error.
		rd := instance.ReplicaDir{Name: r.Name, Dir: replicaDir(r), Backing: backing[r.Name], New: r.Spec.HealthyAt == ""}
		// A failed replica missed writes: it stays out of the engine.
		if r.Spec.FailedAt != "" {
			rd.Failed = true
			startDirs = append(startDirs, rd)
			continue
		}
		dirs = append(dirs, rd)
		startDirs = append(startDirs, rd)
	}
	return dirs, startDirs
}

// markedFailed are the replicas marked failed (spec.failedAt).
func markedFailed(replicas []*longhorn.Replica) []*longhorn.Replica {
	var failed []*longhorn.Replica
	for _, r := range replicas {
		if r.Spec.FailedAt != "" {
			failed = append(failed, r)
		}
	}
	return failed
}

// The volume's Restore condition, on a volume made fromBackup: False
// while the restore runs (its message says how far) or after it failed
// (why), True once the volume holds the backup.
const (
	ConditionTypeRestore = "Restore"
	ReasonRestoring      = "Restoring"
	ReasonRestoreFailed  = "RestoreFailed"
	ReasonRestored       = "Restored"
)

// replicasNotLocal says why this node's engine may not open the volume's
// replicas: one is on another node, or names a disk this node does not
// have (by UUID and path). nil when every replica is on this node's disks.
func (c *Controller) replicasNotLocal(v *longhorn.Volume, replicas []*longhorn.Replica, forClone bool) error {
	if remoteAllowed(v, c.ownership.NodeID, forClone) {
		// Those on other nodes are reached there (remoteReplicas).
		replicas = c.localOnly(replicas)
	} else if err := datastore.AttachRefusal(v.Name, c.ownership.NodeID, replicas); err != nil {
		return err
	}
	if len(replicas) == 0 {
		return nil
	}
	node, err := c.ds.GetNodeRO(c.ownership.NodeID)
	if err != nil {
		return fmt.Errorf("node %s: %w", c.ownership.NodeID, err)
	}
	for _, r := range replicas {
		found := false
		for name, d := range node.Spec.Disks {
			st := node.Status.DiskStatus[name]
			if d.Path == r.Spec.DiskPath && st != nil && st.DiskUUID == r.Spec.DiskID {
				found = true
				break
			}
		}
		if !found {
			return &diskNotHereError{fmt.Sprintf("volume %s cannot be attached to node %q: replica %s is on disk %s at %s, which is not a disk of node %q (by that UUID at that path)",
				v.Name, c.ownership.NodeID, r.Name, r.Spec.DiskID, r.Spec.DiskPath, c.ownership.NodeID)}
		}
	}
	return nil
}

// diskNotHereError: a replica of this node names a disk the node does not
// have (removed, or replaced by another at the same path).
type diskNotHereError struct{ msg string }

func (e *diskNotHereError) Error() string { return e.msg }

// markHealthy records in spec.healthyAt that each replica's data exists,
// once an engine opened it: from then on it is only ever opened, never
// created again. The written objects replace those in replicas, so the
// status writes that follow carry their resource version.
func (c *Controller) markHealthy(ctx context.Context, replicas []*longhorn.Replica, only ...func(*longhorn.Replica) bool) error {
	for i, r := range replicas {
		if r.Spec.HealthyAt != "" || len(only) > 0 && !only[0](r) {
			continue
		}
		updated := r.DeepCopy()
		updated.Spec.HealthyAt = c.clock.Now().UTC().Format(time.RFC3339)
		written, err := c.ds.UpdateReplica(ctx, updated)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			// Gone, or the cache is behind a write (most likely this
			// one): the next sync reads it again.
			continue
		}
		if err != nil {
			return fmt.Errorf("record that replica %s holds data: %w", r.Name, err)
		}
		replicas[i] = written
	}
	return nil
}

// findReplica returns the replica of that name, nil when none.
func findReplica(replicas []*longhorn.Replica, name string) *longhorn.Replica {
	for _, r := range replicas {
		if r.Name == name {
			return r
		}
	}
	return nil
}
