package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	enginecontroller "github.com/cadence-storage/longhorn-manager/engine/controller"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/internal/panics"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// replicaDataDir names a replica's folder after the volume, a piece of its
// UID (so a new volume with an old name never opens old data) and the
// replica's number.
func replicaDataDir(v *longhorn.Volume, i int) string {
	uid := string(v.UID)
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return fmt.Sprintf("%s-%s-%d", v.Name, uid, i)
}

// replicaDir is where a replica keeps its data on its disk.
func replicaDir(r *longhorn.Replica) string {
	return filepath.Join(r.Spec.DiskPath, "replicas", r.Spec.DataDirectoryName)
}

// ensureObjects creates the volume's Replicas (on a ready disk of this
// node) and its Engine, named <volume>-r-<n> and <volume>-e-0.
// Missing replicas are created only while every existing one is on this
// node: a volume's replicas stay together on the node that holds them,
// where its engine opens them. attachTo is the node the Engine is to run
// on ("" for none).
func (c *VolumeController) ensureObjects(ctx context.Context, v *longhorn.Volume, attachTo string) ([]*longhorn.Replica, *longhorn.Engine, error) {
	replicas, err := c.ds.ListVolumeReplicasRO(v.Name)
	if err != nil {
		return nil, nil, err
	}
	if len(replicas) < v.Spec.NumberOfReplicas && datastore.AttachRefusal(v.Name, c.ownership.NodeID, replicas) == nil {
		diskUUID, diskPath, err := c.readyDisk()
		if err != nil {
			return nil, nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		have := map[string]bool{}
		for _, r := range replicas {
			have[r.Name] = true
		}
		for i := 0; len(replicas) < v.Spec.NumberOfReplicas; i++ {
			name := fmt.Sprintf("%s-r-%d", v.Name, i)
			if have[name] {
				continue
			}
			r := &longhorn.Replica{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{types.LabelVolume: v.Name}, OwnerReferences: kit.OwnedBy(v)},
				Spec: longhorn.ReplicaSpec{
					InstanceSpec: longhorn.InstanceSpec{VolumeName: v.Name, VolumeSize: v.Spec.Size, NodeID: c.ownership.NodeID, DataEngine: longhorn.DataEngineTypeV1},
					DiskID:       diskUUID, DiskPath: diskPath, DataDirectoryName: replicaDataDir(v, i),
					BackingImage: v.Spec.BackingImage, Active: true,
				},
			}
			created, err := c.ds.CreateReplica(ctx, r)
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, nil, fmt.Errorf("create replica %s: %w", name, err)
			}
			if err == nil {
				replicas = append(replicas, created)
				c.Logger.WithFields(logrus.Fields{"volume": v.Name, "replica": name, "disk": diskPath}).Info("Created replica")
			}
		}
	}
	sort.Slice(replicas, func(i, j int) bool { return replicas[i].Name < replicas[j].Name })

	addresses := map[string]string{}
	for _, r := range replicas {
		addresses[r.Name] = replicaDir(r)
	}
	name := datastore.EngineName(v.Name)
	e, err := c.ds.GetEngineRO(name)
	if apierrors.IsNotFound(err) {
		e, err = c.ds.CreateEngine(ctx, &longhorn.Engine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{types.LabelVolume: v.Name}, OwnerReferences: kit.OwnedBy(v)},
			Spec: longhorn.EngineSpec{
				InstanceSpec:      longhorn.InstanceSpec{VolumeName: v.Name, VolumeSize: v.Spec.Size, DataEngine: longhorn.DataEngineTypeV1},
				Frontend:          v.Spec.Frontend,
				ReplicaAddressMap: addresses,
			},
		})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, nil, fmt.Errorf("create engine %s: %w", name, err)
		}
		return replicas, e, nil
	}
	if err != nil {
		return nil, nil, err
	}
	desired := e.DeepCopy()
	desired.Spec.NodeID = attachTo
	desired.Spec.ReplicaAddressMap = addresses
	desired.Spec.DisableFrontend = v.Spec.DisableFrontend
	desired.Spec.DesireState = longhorn.InstanceStateStopped
	if attachTo != "" {
		desired.Spec.DesireState = longhorn.InstanceStateRunning
	}
	if !equality.Semantic.DeepEqual(desired.Spec, e.Spec) {
		if e, err = c.ds.UpdateEngine(ctx, desired); err != nil {
			return nil, nil, err
		}
	}
	return replicas, e, nil
}

// readyDisk picks the first ready disk of this node, by name.
func (c *VolumeController) readyDisk() (uuid, path string, err error) {
	node, err := c.ds.GetNodeRO(c.ownership.NodeID)
	if err != nil {
		return "", "", fmt.Errorf("node %s: %w", c.ownership.NodeID, err)
	}
	names := make([]string, 0, len(node.Spec.Disks))
	for n := range node.Spec.Disks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		st := node.Status.DiskStatus[n]
		if st != nil && st.DiskUUID != "" && kit.GetCondition(st.Conditions, longhorn.ConditionTypeReady).Status == longhorn.ConditionStatusTrue {
			return st.DiskUUID, node.Spec.Disks[n].Path, nil
		}
	}
	return "", "", fmt.Errorf("node %s has no ready disk for replicas", c.ownership.NodeID)
}

// syncAttachment starts the engine where the volume is attached, stops it
// when it is detached, and mirrors the engine into the Engine's and the
// Volume's status.
func (c *VolumeController) syncAttachment(ctx context.Context, v *longhorn.Volume) error {
	// written is the Engine's resource version once its status is current.
	var written string
	existing, err := c.ds.ListVolumeReplicasRO(v.Name)
	if err != nil {
		return err
	}
	// The engine opens replicas only from this node's own disks: a volume
	// whose replicas are elsewhere neither restores nor attaches here.
	notLocal := c.replicasNotLocal(v, existing)
	attachTo := v.Spec.NodeID
	if notLocal != nil {
		attachTo = ""
	}
	replicas, e, err := c.ensureObjects(ctx, v, attachTo)
	if err != nil {
		return err
	}
	if notLocal == nil {
		notLocal = c.replicasNotLocal(v, replicas)
	}
	status := e.Status.DeepCopy()
	vstatus := v.Status.DeepCopy()
	failed := map[string]bool{}
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
	dirs := make([]instance.ReplicaDir, 0, len(replicas))
	for _, r := range replicas {
		// Only a replica whose data was never created may be created: any
		// other is opened, and its data missing is an error.
		dirs = append(dirs, instance.ReplicaDir{Name: r.Name, Dir: replicaDir(r), Backing: backing[r.Name], New: r.Spec.HealthyAt == ""})
	}
	_, running := c.instances.Get(v.Name)
	// An engine already running keeps its open backing files; one that is
	// not starts only once every replica's file is ready.
	ready := waiting == "" || running
	vstatus.RestoreRequired = v.Spec.FromBackup != "" && status.LastRestoredBackup != v.Spec.FromBackup
	if vstatus.RestoreRequired && len(replicas) == v.Spec.NumberOfReplicas && ready && notLocal == nil {
		if err := c.restore(ctx, v, dirs); err != nil {
			vstatus.Conditions = kit.SetCondition(vstatus.Conditions, "Restore", longhorn.ConditionStatusFalse, "RestoreFailed", err.Error(), c.clock.Now())
			c.updateVolumeStatus(ctx, v, vstatus)
			return err
		}
		if err := c.markHealthy(ctx, replicas); err != nil {
			return err
		}
		status.LastRestoredBackup = v.Spec.FromBackup
		vstatus.RestoreRequired, vstatus.RestoreInitiated = false, true
		vstatus.Conditions = kit.SetCondition(vstatus.Conditions, "Restore", longhorn.ConditionStatusTrue, "Restored", "", c.clock.Now())
	}
	switch {
	case v.Spec.NodeID == "":
		vstatus.Conditions = slices.DeleteFunc(vstatus.Conditions, func(c longhorn.Condition) bool { return c.Type == ConditionTypeAttach })
	case v.Spec.NodeID == c.ownership.NodeID && notLocal != nil:
		reason := ReasonReplicasOnOtherNode
		var disk *diskNotHereError
		if errors.As(notLocal, &disk) {
			reason = ReasonReplicaDiskMissing
		}
		vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeAttach, longhorn.ConditionStatusFalse, reason, notLocal.Error(), c.clock.Now())
	}
	if v.Spec.NodeID == c.ownership.NodeID && notLocal == nil && len(replicas) > 0 && !vstatus.RestoreRequired && ready {
		run, err := c.instances.Start(v.Name, v.Spec.Size, dirs, !v.Spec.DisableFrontend)
		if err != nil {
			status.CurrentState = longhorn.InstanceStateError
			_, _ = c.writeStatus(ctx, e, status)
			reason := ReasonEngineStartFailed
			var missing *instance.MissingDataError
			if errors.As(err, &missing) {
				reason = ReasonReplicaDataMissing
				failed[missing.Replica] = true
				if serr := c.syncReplicaStatus(ctx, replicas, status, failed); serr != nil {
					c.Logger.WithError(serr).WithField("volume", v.Name).Warn("Could not mark the replica failed")
				}
			}
			vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeAttach, longhorn.ConditionStatusFalse, reason, err.Error(), c.clock.Now())
			if serr := c.updateVolumeStatus(ctx, v, vstatus); serr != nil {
				c.Logger.WithError(serr).WithField("volume", v.Name).Warn("Could not say why the volume does not attach")
			}
			return err
		}
		if err := c.markHealthy(ctx, replicas); err != nil {
			return err
		}
		vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeAttach, longhorn.ConditionStatusTrue, "Attached", "", c.clock.Now())
		host, port, _ := net.SplitHostPort(c.engineAddress)
		status.CurrentState, status.Started, status.OwnerID = longhorn.InstanceStateRunning, true, c.ownership.NodeID
		status.IP, status.StorageIP = host, host
		status.Port, _ = strconv.Atoi(port)
		status.Endpoint = run.Endpoint
		status.CurrentSize = v.Spec.Size
		// Read the generation first: a change while mirroring moves it, so
		// the next sync reads the engine again.
		gen := run.Engine.Generation()
		if !c.mirrors.current(v.Name, run.Engine, gen, e) {
			c.mirrorEngine(run.Engine, status)
		}
		defer func() {
			if written != "" {
				c.mirrors.record(v.Name, run.Engine, gen, written)
			}
		}()
		// What the engine serves: a frontend is started on a running
		// engine when asked for, never taken away from one.
		vstatus.State, vstatus.CurrentNodeID, vstatus.FrontendDisabled = longhorn.VolumeStateAttached, c.ownership.NodeID, run.Endpoint == ""
		vstatus.Robustness = robustness(status.ReplicaModeMap, v.Spec.NumberOfReplicas)
	} else {
		if err := c.instances.Stop(v.Name); err != nil {
			c.Logger.WithError(err).WithField("volume", v.Name).Warn("Engine stopped with an error")
		}
		c.mirrors.forget(v.Name)
		status.CurrentState, status.Started, status.Endpoint, status.IP, status.StorageIP, status.Port = longhorn.InstanceStateStopped, false, "", "", "", 0
		status.ReplicaModeMap, status.PurgeStatus, status.BackupStatus = nil, nil, nil
		vstatus.State, vstatus.CurrentNodeID, vstatus.Robustness = longhorn.VolumeStateDetached, "", longhorn.VolumeRobustnessUnknown
	}
	if written, err = c.writeStatus(ctx, e, status); err != nil {
		return err
	}
	if err := c.syncReplicaStatus(ctx, replicas, status, failed); err != nil {
		return err
	}
	return c.updateVolumeStatus(ctx, v, vstatus)
}

// The volume's Attach condition: True once its engine runs on the node in
// spec.nodeID, False with the reason while it cannot; a volume with no
// node has none.
const (
	ConditionTypeAttach       = "Attach"
	ReasonReplicasOnOtherNode = "ReplicasOnOtherNode"
	ReasonReplicaDiskMissing  = "ReplicaDiskMissing"
	ReasonReplicaDataMissing  = "ReplicaDataMissing"
	ReasonEngineStartFailed   = "EngineStartFailed"
)

// replicasNotLocal says why this node's engine may not open the volume's
// replicas: one is on another node, or names a disk this node does not
// have (by UUID and path). nil when every replica is on this node's disks.
func (c *VolumeController) replicasNotLocal(v *longhorn.Volume, replicas []*longhorn.Replica) error {
	if err := datastore.AttachRefusal(v.Name, c.ownership.NodeID, replicas); err != nil {
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
func (c *VolumeController) markHealthy(ctx context.Context, replicas []*longhorn.Replica) error {
	for i, r := range replicas {
		if r.Spec.HealthyAt != "" {
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

// syncReplicaStatus sets each Replica's state from the engine: running
// while the engine runs and uses it, error once the engine dropped it or
// could not open it (failed), stopped otherwise.
func (c *VolumeController) syncReplicaStatus(ctx context.Context, replicas []*longhorn.Replica, engine *longhorn.EngineStatus, failed map[string]bool) error {
	for _, r := range replicas {
		st := r.Status.DeepCopy()
		st.OwnerID = c.ownership.NodeID
		switch {
		case failed[r.Name]:
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

func (c *VolumeController) updateVolumeStatus(ctx context.Context, v *longhorn.Volume, vstatus *longhorn.VolumeStatus) error {
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

// restore writes the volume's fromBackup into its new replicas, through an
// engine started without a frontend, before the volume may attach.
func (c *VolumeController) restore(ctx context.Context, v *longhorn.Volume, dirs []instance.ReplicaDir) error {
	target, volume, backup, err := backupstore.ParseURL(v.Spec.FromBackup)
	if err != nil {
		return err
	}
	// The backup-target-credential-secret opens the backup's target, as
	// Longhorn does, whichever target the backup URL names.
	var cred map[string]string
	if backupstore.UsesCredential(target) {
		if cred, err = c.ds.GetBackupTargetCredential(ctx); err != nil {
			return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
		}
	}
	store, err := backupstore.OpenWithCredential(target, cred)
	if err != nil {
		return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
	}
	info, err := store.Get(volume, backup)
	if err != nil {
		return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
	}
	if err := c.checkRestoreBackingImage(v, info); err != nil {
		return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
	}
	_, wasRunning := c.instances.Get(v.Name)
	run, err := c.instances.Start(v.Name, v.Spec.Size, dirs, false)
	if err != nil {
		return err
	}
	start := time.Now()
	err = func() (err error) {
		// A panic in the restore (a malformed backup, a bug) is its error:
		// the engine started for it stops, and the volume says why.
		defer panics.Recover(c.Logger.WithFields(logrus.Fields{"volume": v.Name, "fromBackup": v.Spec.FromBackup}), &err)
		return run.Engine.Restore(store, volume, backup)
	}()
	if !wasRunning {
		if stopErr := c.instances.Stop(v.Name); err == nil {
			err = stopErr
		}
	}
	if err != nil {
		return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
	}
	c.Logger.WithFields(logrus.Fields{"volume": v.Name, "backup": backup, "took": time.Since(start).Round(time.Millisecond)}).Info("Restored volume from backup")
	return nil
}

// mirrorEngine copies the running engine's replicas, snapshots and purge
// into the Engine status. The snapshot list keeps the entries of a failed
// read out, with the error, rather than dropping them.
func (c *VolumeController) mirrorEngine(e *enginecontroller.Engine, status *longhorn.EngineStatus) {
	status.ReplicaModeMap = map[string]longhorn.ReplicaMode{}
	for name, mode := range e.ReplicaModes() {
		status.ReplicaModeMap[name] = longhorn.ReplicaMode(mode)
	}
	list, err := e.Snapshots()
	if err != nil {
		status.SnapshotsError = err.Error()
	} else {
		status.SnapshotsError = ""
		status.Snapshots = map[string]*longhorn.SnapshotInfo{}
		for _, s := range list {
			children := map[string]bool{}
			for _, child := range s.Children {
				children[child] = true
			}
			status.Snapshots[s.Name] = &longhorn.SnapshotInfo{Name: s.Name, Parent: s.Parent, Children: children, Removed: s.Removed,
				UserCreated: s.UserCreated, Created: s.Created, Size: strconv.FormatInt(s.Size, 10), Labels: s.Labels}
		}
	}
	status.BackupStatus = map[string]*longhorn.EngineBackupStatus{}
	for name, st := range e.BackupStatuses() {
		status.BackupStatus[name] = &longhorn.EngineBackupStatus{SnapshotName: st.Snapshot, Progress: st.Progress, State: st.State, BackupURL: st.URL, Error: st.Error}
	}
	p := e.PurgeStatus()
	status.PurgeStatus = map[string]*longhorn.PurgeStatus{c.engineAddress: {IsPurging: p.IsPurging, Progress: p.Progress, State: p.State, Error: p.Error}}
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

// writeStatus writes the Engine's status when it changed and returns the
// resource version that holds it.
func (c *VolumeController) writeStatus(ctx context.Context, e *longhorn.Engine, status *longhorn.EngineStatus) (string, error) {
	if !kit.StatusChanged(status, &e.Status) {
		return e.ResourceVersion, nil
	}
	updated := e.DeepCopy()
	updated.Status = *status
	written, err := c.ds.UpdateEngineStatus(ctx, updated)
	if err != nil {
		return "", fmt.Errorf("update status of engine %s: %w", e.Name, err)
	}
	return written.ResourceVersion, nil
}

// cleanup runs while the volume is being deleted: the engine stops, the
// replicas' data on this node's disks goes, then the finalizer. The Engine
// and Replica objects follow through their owner references.
func (c *VolumeController) cleanup(ctx context.Context, v *longhorn.Volume) error {
	if !kit.HasFinalizer(v) {
		return nil
	}
	// The volume waits until its Snapshot objects are gone; the snapshot
	// controller releases them at once, as their data goes with the volume.
	snaps, err := c.ds.ListVolumeSnapshotsRO(v.Name)
	if err != nil {
		return err
	}
	if len(snaps) > 0 {
		for _, s := range snaps {
			if s.DeletionTimestamp == nil {
				if err := c.ds.DeleteSnapshot(ctx, s.Name); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
		}
		c.Queue.AddAfter(c.ds.Namespace()+"/"+v.Name, time.Second)
		return nil
	}
	if err := c.instances.Stop(v.Name); err != nil {
		c.Logger.WithError(err).WithField("volume", v.Name).Warn("Engine stopped with an error")
	}
	replicas, err := c.ds.ListVolumeReplicasRO(v.Name)
	if err != nil {
		return err
	}
	for _, r := range replicas {
		if r.Spec.NodeID != c.ownership.NodeID || r.Spec.DataDirectoryName == "" {
			continue
		}
		if err := os.RemoveAll(replicaDir(r)); err != nil {
			return fmt.Errorf("volume %s: remove the data of replica %s: %w", v.Name, r.Name, err)
		}
	}
	updated := v.DeepCopy()
	kit.RemoveFinalizer(updated)
	if _, err := c.ds.UpdateVolume(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.Logger.WithFields(logrus.Fields{"volume": v.Name, "replicas": len(replicas)}).Info("Deleted the volume's data")
	return nil
}
