package volume

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	"github.com/cadence-storage/longhorn-manager/internal/panics"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// A volume made with spec.dataSource (vol://<volume> or
// snap://<volume>/<snapshot>, Longhorn's) is filled with the bytes of a
// snapshot of its source before it may attach, as a volume made
// fromBackup is restored first. The copy runs beside the volume's syncs
// (as a restore does), through the two engines in this manager: the
// source's, which holds the snapshot while it is read, and the clone's,
// started without a frontend. A clone is made on the node that holds its
// source's replicas (the sync prefers that node), where the source's
// engine runs: attached there, or started without a frontend for the
// clone while the source is detached. The source is only read.

// Volume.status.cloneStatus.state, Longhorn's.
const (
	CloneStateInitiated = "initiated"
	CloneStateCompleted = "completed"
	CloneStateFailed    = "failed"
)

// The volume's Clone condition, on a volume made with a dataSource: False
// while the clone waits or runs (its message says for what, or how far)
// or after it failed (why), True once the volume holds the snapshot.
const (
	ConditionTypeClone = "Clone"
	ReasonCloning      = "Cloning"
	ReasonCloneFailed  = "CloneFailed"
	ReasonCloned       = "Cloned"
)

// cloneProgressInterval is how often a volume being cloned syncs to show
// its progress.
const cloneProgressInterval = 3 * time.Second

// cloneRequired reports whether v waits for its clone: it has a data
// source and its clone has not completed.
func cloneRequired(v *longhorn.Volume) bool {
	return v.Spec.DataSource != "" && v.Status.CloneStatus.State != CloneStateCompleted
}

// cloneSnapshotName is the snapshot a vol:// clone takes of its source:
// named after the two volumes' UIDs, so a retried or restarted clone
// finds the one it took, and a new volume of the same name takes its own.
func cloneSnapshotName(source, clone *longhorn.Volume) string {
	sum := sha256.Sum256([]byte(string(source.UID) + "/" + string(clone.UID)))
	return "clone-" + hex.EncodeToString(sum[:12])
}

// cloneSource reads v's data source and its source volume, and the
// snapshot the clone copies.
func (c *Controller) cloneSource(v *longhorn.Volume) (types.DataSource, *longhorn.Volume, error) {
	ds, err := types.ParseDataSource(v.Spec.DataSource)
	switch {
	case err != nil:
		return ds, nil, fmt.Errorf("dataSource: %w", err)
	case v.Spec.FromBackup != "":
		return ds, nil, fmt.Errorf("dataSource %s: the volume is made from a backup (fromBackup) too; it cannot be both", v.Spec.DataSource)
	case v.Spec.BackingImage != "":
		return ds, nil, fmt.Errorf("dataSource %s: the volume is on backing image %s, whose bytes a clone would mix with its source's", v.Spec.DataSource, v.Spec.BackingImage)
	}
	src, err := c.ds.GetVolumeRO(ds.Volume)
	if apierrors.IsNotFound(err) {
		return ds, nil, fmt.Errorf("dataSource %s: source volume %s does not exist", v.Spec.DataSource, ds.Volume)
	}
	if err != nil {
		return ds, nil, err
	}
	if src.DeletionTimestamp != nil {
		return ds, nil, fmt.Errorf("dataSource %s: source volume %s is being deleted", v.Spec.DataSource, ds.Volume)
	}
	if src.Name == v.Name {
		return ds, nil, fmt.Errorf("dataSource %s: a volume cannot be its own source", v.Spec.DataSource)
	}
	if ds.Snapshot == "" {
		ds.Snapshot = cloneSnapshotName(src, v)
	}
	return ds, src, nil
}

// cloneSourceNode is the node that holds the replicas of v's source: the
// clone is made there. Empty when v is no clone, or its source has none.
func (c *Controller) cloneSourceNode(v *longhorn.Volume) string {
	if v.Spec.DataSource == "" {
		return ""
	}
	ds, err := types.ParseDataSource(v.Spec.DataSource)
	if err != nil {
		return ""
	}
	replicas, err := c.ds.ListVolumeReplicasRO(ds.Volume)
	if err != nil {
		return ""
	}
	return datastore.ReplicasNode(replicas)
}

// syncClone starts the clone of v, or tells of the one waiting or
// running: running while it does. st is what the volume's cloneStatus
// becomes. A run that ended is reported once: nil when the volume holds
// the snapshot; its error, after which the clone is tried again once its
// backoff has passed (a retry writes the whole snapshot again, and zeros
// over anything an attempt left where the snapshot holds none: see
// volumeengine.Engine.Clone).
func (c *Controller) syncClone(v *longhorn.Volume, dirs []instance.ReplicaDir) (running bool, st longhorn.VolumeCloneStatus, err error) {
	ds, src, err := c.cloneSource(v)
	st = longhorn.VolumeCloneStatus{SourceVolume: ds.Volume, Snapshot: ds.Snapshot, State: CloneStateInitiated}
	if err != nil {
		c.stopClone(v.Name)
		st.State = CloneStateFailed
		return false, st, err
	}
	r, step, runErr := c.clones.step(v, ds, c.clock.Now(), c.Logger)
	switch step {
	case stepRetryLater:
		// Its error was reported once, when it failed.
		st.State = CloneStateFailed
		return false, st, nil
	case stepFailed:
		c.EnqueueVolume(ds.Volume) // the source's engine may stop
		st.State = CloneStateFailed
		return false, st, runErr
	case stepCompleted:
		c.EnqueueVolume(ds.Volume)
		st.State = CloneStateCompleted
		return false, st, nil
	case stepRunning:
		return true, st, nil
	}
	srcRun, ok := c.instances.Get(ds.Volume)
	// A source being restored or cloned itself runs an engine for that,
	// which holds only part of its data: the clone waits until it is done.
	if !ok || src.Status.RestoreRequired || cloneRequired(src) {
		// The source's sync starts its engine for the clone.
		c.EnqueueVolume(ds.Volume)
		return true, st, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	if !c.clones.start(v.Name, r, cancel) {
		cancel()
		return false, st, errors.New("the clone was stopped")
	}
	v, dirs = v.DeepCopy(), slices.Clone(dirs)
	log := c.Logger.WithFields(logrus.Fields{"volume": v.Name, "dataSource": v.Spec.DataSource, "snapshot": ds.Snapshot})
	go func() {
		r.err = func() (err error) {
			// A panic outside the engine's own guard is the clone's error
			// too, not the node's.
			defer panics.Recover(log, &err)
			return c.clone(ctx, log, v, dirs, ds, src, srcRun.Engine)
		}()
		cancel()
		close(r.done)
		// After done, so the sync this brings sees the end.
		c.EnqueueVolume(v.Name)
	}()
	log.Info("Started the volume's clone")
	return true, st, nil
}

// clone copies the snapshot of the source into v's new replicas through an
// engine started without a frontend; for a vol:// source it first takes
// the snapshot (or finds the one it took before). Cancelling ctx stops it.
func (c *Controller) clone(ctx context.Context, log *logrus.Entry, v *longhorn.Volume, dirs []instance.ReplicaDir,
	ds types.DataSource, src *longhorn.Volume, srcEngine instance.Engine) error {
	what := fmt.Sprintf("clone volume %s from %s", v.Name, v.Spec.DataSource)
	if srcEngine.Size() > v.Spec.Size {
		return fmt.Errorf("%s: size: %d bytes is less than source volume %s's %d bytes", what, v.Spec.Size, src.Name, srcEngine.Size())
	}
	snap, err := srcEngine.Snapshot(ds.Snapshot)
	switch {
	case errors.Is(err, volumeengine.ErrNotFound) && v.Spec.DataSource == types.DataSourceVolumePrefix+src.Name:
		if _, err := srcEngine.CreateSnapshot(ds.Snapshot, map[string]string{types.LabelSnapshotForCloning: v.Name}); err != nil {
			return fmt.Errorf("%s: take the snapshot of the source: %w", what, err)
		}
		log.Info("Took the snapshot of the source volume to clone")
	case errors.Is(err, volumeengine.ErrNotFound):
		return fmt.Errorf("%s: volume %s has no snapshot %s", what, src.Name, ds.Snapshot)
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	case snap.Removed:
		return fmt.Errorf("%s: snapshot %s of volume %s is deleted (marked removed), it cannot be read", what, ds.Snapshot, src.Name)
	}
	_, wasRunning := c.instances.Get(v.Name)
	run, err := c.instances.Start(v.Name, v.Spec.Size, dirs, false)
	if err != nil {
		return err
	}
	start := time.Now()
	err = run.Engine.CloneFrom(ctx, srcEngine, ds.Snapshot, ds.String())
	if !wasRunning {
		if stopErr := c.instances.StopEngine(v.Name, run.Engine); err == nil {
			err = stopErr
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	log.WithField("took", time.Since(start).Round(time.Millisecond)).Info("Cloned volume from the snapshot of its source")
	return nil
}

// cloneProgress is how far the clone of the volume is, from its engine
// while it runs.
func (c *Controller) cloneProgress(volume string) (int, bool) {
	run, ok := c.instances.Get(volume)
	if !ok {
		return 0, false
	}
	st := run.Engine.CloneStatus()
	return st.Progress, st.IsCloning
}

// syncCloneStatus runs v's clone while it is required and can run
// (canRun: its replicas are here, ready and not all failed), and writes
// its state into vstatus: cloneStatus and the Clone condition. It reports
// whether the clone waits or runs; an error is the failed clone's, after
// its status is written.
func (c *Controller) syncCloneStatus(ctx context.Context, v *longhorn.Volume, vstatus *longhorn.VolumeStatus,
	replicas []*longhorn.Replica, dirs []instance.ReplicaDir, canRun bool) (bool, error) {
	if !cloneRequired(v) {
		// The status says completed: the run, if any, is done with.
		c.forgetClone(v.Name)
		return false, nil
	}
	if len(replicas) != v.Spec.NumberOfReplicas || !canRun {
		return false, nil
	}
	running, st, err := c.syncClone(v, dirs)
	vstatus.CloneStatus = st
	now := c.clock.Now()
	switch {
	case err == nil && st.State == CloneStateFailed:
		// Waits for its retry: the condition still says why it failed.
		return false, nil
	case err != nil:
		vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeClone, longhorn.ConditionStatusFalse, ReasonCloneFailed, err.Error(), now)
		if v.Status.CloneStatus.State != CloneStateFailed || kit.GetCondition(v.Status.Conditions, ConditionTypeClone).Message != err.Error() {
			c.Logger.WithError(err).WithFields(logrus.Fields{"volume": v.Name, "dataSource": v.Spec.DataSource}).Warn("Clone failed: it is tried again after a backoff")
		}
		if werr := c.updateVolumeStatus(ctx, v, vstatus); werr != nil {
			c.Logger.WithError(werr).WithField("volume", v.Name).Warn("Could not write the failed clone into the volume's status")
		}
		return false, err
	case running:
		msg := fmt.Sprintf("waiting for source volume %s: its engine to start on node %s, or its own restore or clone to end", st.SourceVolume, c.ownership.NodeID)
		if p, ok := c.cloneProgress(v.Name); ok {
			msg = fmt.Sprintf("cloning snapshot %s of volume %s: %d%%", st.Snapshot, st.SourceVolume, p)
		}
		vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeClone, longhorn.ConditionStatusFalse, ReasonCloning, msg, now)
		return true, nil
	default:
		if err := c.markHealthy(ctx, replicas); err != nil {
			return false, err
		}
		vstatus.Conditions = kit.SetCondition(vstatus.Conditions, ConditionTypeClone, longhorn.ConditionStatusTrue, ReasonCloned,
			fmt.Sprintf("holds snapshot %s of volume %s", st.Snapshot, st.SourceVolume), now)
		return false, nil
	}
}
