package snapshot

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Controller keeps a Snapshot object for every engine snapshot
// and the engine snapshot of every Snapshot object a user creates. It
// runs on the node that owns the snapshot's volume, where the volume's
// engine runs, and reads a snapshot from that engine: one read per
// change of the engine, which the Engine status mirror shares (see
// volumeengine.Engine.Status). A volume whose engine does not run here
// has its snapshots read from engine.status.snapshots, the volume
// controller's mirror. The engine's changes bring back the objects they
// concern, in rounds paced as Longhorn's engine poll (statusPace), so a
// Snapshot object does not wait for that mirror, whose snapshot list is
// paced longer.
//
// Ownership: the owner of the snapshot's volume (its engine runs there);
// the Snapshot has no owner of its own.
type Controller struct {
	*kit.Base
	ds        *datastore.DataStore
	nodeID    string
	instances instance.Instances
	// written keeps a sync from acting on a copy older than its own last
	// write (a write from it would be refused with a conflict).
	written kit.Written
	// rounds paces the syncs the engines' changes ask for.
	rounds statusRounds
	// freezer, when set, freezes a volume's mounted filesystem for its
	// snapshot, as the volume's policy asks (SetFreezer).
	freezer Freezer
}

// Freezer runs a snapshot of a volume with its mounted filesystem frozen
// when the volume's policy asks for it (fsfreeze.Guard).
type Freezer interface {
	Around(ctx context.Context, volume string, snapshot func() error) error
}

// SetFreezer has the snapshots this controller takes freeze their
// volume's filesystem as its policy asks. Set before Run.
func (c *Controller) SetFreezer(f Freezer) { c.freezer = f }

// NewController wires the controller to the Snapshot and Engine
// informers.
func NewController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, nodeID string, instances instance.Instances) *Controller {
	lh := inf.Longhorn.Longhorn().V1beta2()
	c := &Controller{ds: ds, nodeID: nodeID, instances: instances}
	c.Base = kit.NewBase("longhorn-snapshot", logger, metrics, c.sync,
		lh.Snapshots().Informer().HasSynced, lh.Engines().Informer().HasSynced, lh.Volumes().Informer().HasSynced)
	lh.Snapshots().Informer().AddEventHandler(c.EventHandler())
	lh.Engines().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.engineChanged(nil, obj) },
		UpdateFunc: c.engineChanged,
	})
	// After a manager's restart a volume's Engine still says running
	// from before, so no change of its state brings back the objects
	// created while no manager ran (nor those whose deletion waits for
	// the engine): the engine's start on this node does.
	instances.OnStart(c.enqueueVolume)
	instances.OnChange(c.localEngineChanged)
	return c
}

// localEngineChanged enqueues, for the volume's next round of status
// writes (statusPace), what a change of its engine running here concerns:
// the snapshots whose objects differ from the engine's entries (new ones
// included, so they get objects), those being deleted, and the objects
// whose snapshot the engine no longer has.
func (c *Controller) localEngineChanged(volume string) {
	run, ok := c.instances.Get(volume)
	if !ok {
		return
	}
	v, err := c.ds.GetVolumeRO(volume)
	if err != nil || v.Status.OwnerID != c.nodeID {
		return
	}
	var keys []string
	// A snapshot being deleted waits for its engine (decide: the deletion
	// waits for the volume to be attached): an engine that starts, or
	// starts again, brings it back whatever it can read yet. Its Engine
	// object may not change at all when the engine stopped and started
	// again between two of its mirrors.
	objects, _ := c.ds.ListVolumeSnapshotsRO(volume)
	for _, snap := range objects {
		if snap.DeletionTimestamp != nil {
			keys = append(keys, c.ds.Namespace()+"/"+snap.Name)
		}
	}
	st := run.Engine.Status()
	if st.SnapshotsError != nil {
		for _, key := range keys {
			c.Queue.Add(key)
		}
		return
	}
	inEngine := make(map[string]bool, len(st.Snapshots))
	for _, s := range st.Snapshots {
		if s.Name == replica.HeadName {
			continue
		}
		inEngine[s.Name] = true
		snap, err := c.ds.GetSnapshotRO(s.Name)
		if err != nil || snap.DeletionTimestamp != nil || kit.StatusChanged(snapshotStatus(kit.SnapshotInfo(s), v, c.nodeID), snap.Status) {
			keys = append(keys, c.ds.Namespace()+"/"+s.Name)
		}
	}
	for _, snap := range objects {
		if !inEngine[snap.Name] && snap.DeletionTimestamp == nil {
			keys = append(keys, c.ds.Namespace()+"/"+snap.Name)
		}
	}
	if len(keys) == 0 {
		return
	}
	wait := c.rounds.wait(volume, time.Now())
	for _, key := range keys {
		c.Queue.AddAfter(key, wait)
	}
}

// engineSnapshot is the entry of snapshot name in the volume's engine:
// from the engine itself when it runs here, else from its Engine
// object's mirror (nil when either has no such snapshot). running tells
// whether the engine runs; listed, whether the engine itself answered
// (its nil is then the truth, a mirror's only maybe: see view).
func engineSnapshot(run instance.Instance, hasEngine bool, e *longhorn.Engine, name string) (info *longhorn.SnapshotInfo, running, listed bool) {
	if hasEngine {
		st := run.Engine.Status()
		if st.SnapshotsError == nil {
			for _, s := range st.Snapshots {
				if s.Name == name {
					return kit.SnapshotInfo(s), true, true
				}
			}
			return nil, true, true
		}
		// No healthy replica to read: the mirror keeps the last entries.
	}
	if e == nil {
		return nil, hasEngine, false
	}
	return e.Status.Snapshots[name], hasEngine || e.Status.CurrentState == longhorn.InstanceStateRunning, false
}

// enqueueVolume enqueues every snapshot of a volume.
func (c *Controller) enqueueVolume(volume string) {
	snaps, _ := c.ds.ListVolumeSnapshotsRO(volume)
	for _, s := range snaps {
		c.Enqueue(s)
	}
}

// engineChanged enqueues only what an Engine change concerns: every
// snapshot of the volume when the engine started or stopped, otherwise the
// snapshots whose entries changed (new ones included, so they get objects).
func (c *Controller) engineChanged(oldObj, newObj any) {
	cur, ok := newObj.(*longhorn.Engine)
	if !ok {
		return
	}
	var old *longhorn.Engine
	if oldObj != nil {
		old, _ = oldObj.(*longhorn.Engine)
	}
	if old == nil || old.Status.CurrentState != cur.Status.CurrentState {
		c.enqueueVolume(cur.Spec.VolumeName)
	} else if !equality.Semantic.DeepEqual(old.Status.PurgeStatus, cur.Status.PurgeStatus) {
		// A purge ended: the snapshots being deleted wait on it (one whose
		// purge failed starts another).
		snaps, _ := c.ds.ListVolumeSnapshotsRO(cur.Spec.VolumeName)
		for _, s := range snaps {
			if s.DeletionTimestamp != nil {
				c.Enqueue(s)
			}
		}
	}
	var before map[string]*longhorn.SnapshotInfo
	if old != nil {
		before = old.Status.Snapshots
	}
	for name, s := range cur.Status.Snapshots {
		if name != replica.HeadName && !equality.Semantic.DeepEqual(s, before[name]) {
			c.Queue.Add(c.ds.Namespace() + "/" + name)
		}
	}
	for name := range before {
		if _, still := cur.Status.Snapshots[name]; !still && name != replica.HeadName {
			c.Queue.Add(c.ds.Namespace() + "/" + name)
		}
	}
}

func (c *Controller) sync(ctx context.Context, key string) (kit.Result, error) {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, err
	}
	snap, err := c.ds.GetSnapshotRO(name)
	if apierrors.IsNotFound(err) {
		c.written.Forget(key)
		return kit.Result{}, c.adoptEngineSnapshot(ctx, name)
	}
	if err != nil {
		return kit.Result{}, err
	}
	if c.written.Stale(key, snap.ResourceVersion) {
		// The informer has yet to bring this controller's last write of
		// the object; its event queues the key again.
		return kit.Result{}, nil
	}
	v, err := c.ds.GetVolumeRO(snap.Spec.Volume)
	if apierrors.IsNotFound(err) || (err == nil && v.DeletionTimestamp != nil) {
		// The snapshot's data goes with its volume.
		return kit.Result{}, c.releaseFinalizer(ctx, snap)
	}
	if err != nil {
		return kit.Result{}, err
	}
	if v.Status.OwnerID != c.nodeID {
		return kit.Result{}, nil
	}
	if needsMutation(snap, v) {
		updated := snap.DeepCopy()
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		updated.Labels[types.LabelVolume] = v.Name
		if !kit.HasFinalizer(updated) && snap.DeletionTimestamp == nil {
			kit.AddFinalizer(updated)
		}
		if len(updated.OwnerReferences) == 0 {
			updated.OwnerReferences = kit.OwnedBy(v)
		}
		// The sync goes on from what was written (its finalizer now
		// holds the object while its engine snapshot is taken), not from
		// the informer bringing it back.
		if snap, err = c.ds.UpdateSnapshot(ctx, updated); err != nil {
			return kit.Result{}, err
		}
		c.remember(snap)
	}

	e, err := c.ds.GetEngineRO(datastore.EngineName(v.Name))
	if err != nil && !apierrors.IsNotFound(err) {
		return kit.Result{}, err
	}
	run, hasEngine := c.instances.Get(v.Name)
	info, running, listed := engineSnapshot(run, hasEngine, e, snap.Name)
	vw := view{snap: snap, volume: v, info: info, running: running, hasEngine: hasEngine, listed: listed}
	if hasEngine && info == nil {
		vw.purged = run.Engine.WasPurged(snap.Name)
	}
	p := decide(vw)
	var res kit.Result
	if snap.DeletionTimestamp != nil && !hasEngine {
		// Its engine's start brings the deletion back; this is the
		// safety net should no event come.
		res.RequeueAfter = deletionRecheck
	}
	err = c.apply(ctx, vw, p, run, e)
	var held *heldWait
	if errors.As(err, &held) {
		// Not a failure: the hold ends by itself. Look again then, not
		// after the queue's backoff, which doubles with each refusal and
		// let a snapshot read by a clone a minute ago wait 80 s more.
		res.RequeueAfter, err = held.after, nil
	}
	return res, err
}

// deletionRecheck is how often a deletion that waits for its volume's
// engine looks again without an event.
const deletionRecheck = 30 * time.Second

// heldWait is apply's answer for a deletion a read's hold refused (an
// export's, a clone's, a backup's): the sync looks again after it, with no
// error.
type heldWait struct{ after time.Duration }

func (h *heldWait) Error() string {
	return fmt.Sprintf("the deletion waits %s for a read's hold", h.after)
}

// heldRecheck is when to try a held snapshot's deletion again: just after
// its hold's lease ends, or, while a read is open (its end unknown), in
// readRecheck; never sooner than a second nor later than deletionRecheck.
// While a backup reads it, in deletionRecheck: a backup may read for
// hours, and its end, a change of the engine, brings the deletion back
// at once (localEngineChanged).
func heldRecheck(held *volumeengine.HeldError, now time.Time) time.Duration {
	switch {
	case len(held.Backups) > 0:
		return deletionRecheck
	case held.Until.IsZero():
		return readRecheck
	}
	return min(max(held.Until.Sub(now)+200*time.Millisecond, time.Second), deletionRecheck)
}

// readRecheck is how often a deletion looks again while an export reads
// the snapshot.
const readRecheck = 5 * time.Second

// apply does what decide decided. The engine's answer to a delete may
// change the plan: a snapshot purged since the engine was read only has
// its finalizer released.
func (c *Controller) apply(ctx context.Context, vw view, p plan, run instance.Instance, e *longhorn.Engine) error {
	snap, v := vw.snap, vw.volume
	switch p.action {
	case nothing:
		return nil
	case releaseFinalizer:
		return c.releaseFinalizer(ctx, snap)
	case reportError:
		return c.setError(ctx, snap, p.message)
	case deleteObject:
		if err := c.ds.DeleteSnapshot(ctx, snap.Name); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	case writeStatus:
		return c.writeStatus(ctx, snap, snapshotStatus(vw.info, v, c.nodeID))
	case createInEngine:
		// The engine itself refuses a second snapshot of the name, under
		// its lock, so a retry never makes two.
		take := func() error {
			_, err := run.Engine.CreateSnapshot(snap.Name, snap.Spec.Labels)
			return err
		}
		var err error
		if c.freezer != nil {
			err = c.freezer.Around(ctx, v.Name, take)
		} else {
			err = take()
		}
		switch {
		case errors.Is(err, volumeengine.ErrExists):
		case err != nil:
			return c.setError(ctx, snap, "cannot create the snapshot: "+err.Error())
		default:
			c.Logger.WithFields(logrus.Fields{"volume": v.Name, "snapshot": snap.Name}).Info("Created the engine snapshot of a Snapshot object")
		}
		// The snapshot is a change of the engine, whose round of status
		// writes (statusPace) writes this status with the rest.
		return nil
	case deleteInEngine:
		err := run.Engine.DeleteSnapshot(snap.Name)
		switch {
		case errors.Is(err, volumeengine.ErrNotFound):
			// Purged since the engine was read.
			return c.releaseFinalizer(ctx, snap)
		case errors.Is(err, volumeengine.ErrPrecondition):
			if serr := c.setError(ctx, snap, "the deletion waits: "+err.Error()); serr != nil {
				return serr
			}
			var held *volumeengine.HeldError
			if errors.As(err, &held) {
				return &heldWait{after: heldRecheck(held, time.Now())}
			}
			return fmt.Errorf("delete engine snapshot %s: %w", snap.Name, err)
		case err != nil:
			return fmt.Errorf("delete engine snapshot %s: %w", snap.Name, err)
		}
	}
	// deleteInEngine done, or markRemoved: the status says so before the
	// purge that frees the data (and ends the deletion) starts.
	if err := c.writeStatus(ctx, snap, removedStatus(vw.info, v, c.nodeID)); err != nil {
		return err
	}
	// StartPurge does nothing while a purge runs.
	run.Engine.StartPurge()
	if why := failedPurge(e); why != "" {
		// The purge started again; the error brings this snapshot back
		// after the queue's backoff, so a purge that keeps failing is
		// retried ever more slowly, not in a loop.
		return fmt.Errorf("the last purge of volume %s failed (%s): purging again to delete snapshot %s", v.Name, why, snap.Name)
	}
	return nil
}

// snapshotStatus is the status of a Snapshot object as its engine
// snapshot shows it.
func snapshotStatus(info *longhorn.SnapshotInfo, v *longhorn.Volume, nodeID string) longhorn.SnapshotStatus {
	status := longhorn.SnapshotStatus{
		Parent: info.Parent, Children: info.Children, MarkRemoved: info.Removed, UserCreated: info.UserCreated,
		CreationTime: info.Created, Labels: info.Labels, OwnerID: nodeID, RestoreSize: v.Spec.Size,
		ReadyToUse: !info.Removed,
	}
	status.Size, _ = strconv.ParseInt(info.Size, 10, 64)
	return status
}

// failedPurge is the error of the engine's last purge as its status
// shows it, or "" when it did not fail.
func failedPurge(e *longhorn.Engine) string {
	if e == nil {
		return ""
	}
	for _, p := range e.Status.PurgeStatus {
		if p != nil && !p.IsPurging && p.Error != "" {
			return p.Error
		}
	}
	return ""
}

// needsMutation tells whether the snapshot lacks what Longhorn gives it
// at admission: its volume label and the finalizer. In the manager's
// namespace the apiserver gives both (package/components/mutating-policies/admission.yaml), and the
// snapshot is taken in with no metadata write. The owner reference to
// the Volume goes with the manager's own write, never alone: no
// admission policy can read the Volume's UID, and the Volume's deletion
// deletes its snapshots by the label, owner reference or not.
func needsMutation(snap *longhorn.Snapshot, v *longhorn.Volume) bool {
	return snap.Labels[types.LabelVolume] != v.Name ||
		(snap.DeletionTimestamp == nil && !kit.HasFinalizer(snap))
}

// adoptEngineSnapshot gives an engine snapshot made without an object (by
// the API or a recurring job) its object, with createSnapshot false.
func (c *Controller) adoptEngineSnapshot(ctx context.Context, name string) error {
	engines, err := c.ds.ListEnginesRO()
	if err != nil {
		return err
	}
	for _, e := range engines {
		run, hasEngine := c.instances.Get(e.Spec.VolumeName)
		info, _, _ := engineSnapshot(run, hasEngine, e, name)
		if info == nil || info.Removed {
			continue
		}
		v, err := c.ds.GetVolumeRO(e.Spec.VolumeName)
		if err != nil || v.Status.OwnerID != c.nodeID || v.DeletionTimestamp != nil {
			continue
		}
		if hasEngine && run.Engine.WasPurged(name) {
			// The entry was read before the purge: the snapshot's
			// object was deleted with it and must not come back.
			continue
		}
		_, err = c.ds.CreateSnapshot(ctx, &longhorn.Snapshot{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Labels: adoptedLabels(v.Name, info.Labels),
				Finalizers: []string{types.LonghornFinalizer}, OwnerReferences: kit.OwnedBy(v),
			},
			Spec: longhorn.SnapshotSpec{Volume: v.Name, CreateSnapshot: false, Labels: info.Labels},
		})
		switch {
		case apierrors.IsInvalid(err):
			// Engine snapshot names allow what object names do not
			// (capitals, '_'): such a snapshot has no object.
			c.Logger.WithFields(logrus.Fields{"volume": v.Name, "snapshot": name}).Debug("Snapshot name cannot be an object name")
		case err != nil && !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("create Snapshot object for %s: %w", name, err)
		}
		return nil
	}
	return nil
}

// adoptedLabels are the object labels of an engine snapshot's object: its
// volume, and the recurring job that took it, so that
// `kubectl delete lhsnap -l RecurringJob=<job>` prunes a job's snapshots.
// A job name that is not a label value is left out (it is still in
// status.labels).
func adoptedLabels(volume string, engineLabels map[string]string) map[string]string {
	labels := map[string]string{types.LabelVolume: volume}
	if job := engineLabels[types.LabelRecurringJob]; job != "" && len(validation.IsValidLabelValue(job)) == 0 {
		labels[types.LabelRecurringJob] = job
	}
	return labels
}

func (c *Controller) releaseFinalizer(ctx context.Context, snap *longhorn.Snapshot) error {
	if !kit.HasFinalizer(snap) {
		return nil
	}
	updated := snap.DeepCopy()
	kit.RemoveFinalizer(updated)
	stored, err := c.ds.UpdateSnapshot(ctx, updated)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		c.remember(stored)
	}
	return err
}

// remember notes the object as this controller's last write stored it.
func (c *Controller) remember(stored *longhorn.Snapshot) {
	c.written.Remember(c.ds.Namespace()+"/"+stored.Name, stored.ResourceVersion)
}

func (c *Controller) setError(ctx context.Context, snap *longhorn.Snapshot, msg string) error {
	status := *snap.Status.DeepCopy()
	status.Error, status.ReadyToUse, status.OwnerID = msg, false, c.nodeID
	return c.writeStatus(ctx, snap, status)
}

func (c *Controller) writeStatus(ctx context.Context, snap *longhorn.Snapshot, status longhorn.SnapshotStatus) error {
	if snap.DeletionTimestamp != nil {
		status.ReadyToUse = false
	}
	if !kit.StatusChanged(status, snap.Status) {
		return nil
	}
	updated := snap.DeepCopy()
	updated.Status = status
	stored, err := c.ds.UpdateSnapshotStatus(ctx, updated)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		c.remember(stored)
	}
	return err
}
