package volume

import (
	"time"

	"context"
	"fmt"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Controller reconciles Volumes: the recurring-job label rule (a
// volume that selects no job and no group is in the default group), the
// volume's Replica and Engine objects, and its attachment: the engine runs
// on the node in spec.nodeID, serving the volume's data there.
//
// Ownership: kit.Ownership, preferring the node in spec.nodeID (where the
// engine runs); the owner writes the volume's Replicas and Engine.
type Controller struct {
	*kit.Base
	ds        *datastore.DataStore
	ownership kit.Ownership
	instances instance.Instances
	// engineAddress is host:port of this node's engine gRPC service.
	engineAddress string
	clock         clock.Clock
	mirrors       engineMirrors
	restores      restores
	clones        clones
	// recorder records the volumes' events; none when nil.
	recorder record.EventRecorder
	// remoteStarts paces the starts over remote replicas that fail.
	remoteStarts remoteStarts
	// started is when this manager started: it leaves no replica of a
	// node that is down out of an engine before nodeDownGrace has passed
	// since (leaveUnreachable).
	started time.Time
}

// NewController wires the controller to the Volume informer.
// instances runs this node's engines; a change there re-enqueues the
// volume, so its status follows the engine.
func NewController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, nodeID string,
	instances instance.Instances, engineAddress string, clk clock.Clock, recorder record.EventRecorder) *Controller {
	informer := inf.Longhorn.Longhorn().V1beta2().Volumes().Informer()
	c := &Controller{ds: ds, ownership: kit.Ownership{NodeID: nodeID, IsUp: ds.IsNodeUp}, instances: instances, engineAddress: engineAddress, clock: clk,
		mirrors: newEngineMirrors(), recorder: recorder, started: clk.Now()}
	c.Base = kit.NewBase("longhorn-volume", logger, metrics, c.sync,
		informer.HasSynced,
		inf.Longhorn.Longhorn().V1beta2().Engines().Informer().HasSynced,
		inf.Longhorn.Longhorn().V1beta2().Replicas().Informer().HasSynced,
		inf.Longhorn.Longhorn().V1beta2().BackingImages().Informer().HasSynced)
	informer.AddEventHandler(c.EventHandler())
	inf.Longhorn.Longhorn().V1beta2().BackingImages().Informer().AddEventHandler(c.backingImageHandler())
	inf.Longhorn.Longhorn().V1beta2().Replicas().Informer().AddEventHandler(c.replicaFailedAtHandler())
	return c
}

// EnqueueVolume asks for a sync of the volume; the engine runtime calls it
// when an engine's snapshots or replicas change. The sync waits out the
// rest of the engine's mirror pace (engineMirrorPace), unless the engine
// ended a backup since its last mirror (engineMirrors.backupEnded).
func (c *Controller) EnqueueVolume(volume string) {
	key := c.ds.Namespace() + "/" + volume
	if run, ok := c.instances.Get(volume); ok {
		if n := run.Engine.BackupsFinished(); c.mirrors.backupEnded(volume, n) {
			c.Logger.WithFields(logrus.Fields{"volume": volume, "backupsEnded": n, "reason": "its engine ended a backup"}).Debug("Mirroring the engine into its Engine status at once, not at the pace")
			c.Queue.Add(key)
			return
		}
	}
	if wait := c.mirrors.wait(volume, time.Now()); wait > 0 {
		c.Queue.AddAfter(key, wait)
		return
	}
	c.Queue.Add(key)
}

func (c *Controller) sync(ctx context.Context, key string) (kit.Result, error) {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, err
	}
	v, err := c.ds.GetVolumeRO(name)
	if apierrors.IsNotFound(err) {
		return kit.Result{}, c.instances.Stop(name)
	}
	if err != nil {
		return kit.Result{}, err
	}
	// The node a volume is attached to owns it; a detached (or deleted)
	// one, the node that holds its replicas, whose disks its data is on.
	preferred := v.Spec.NodeID
	if preferred == "" || v.DeletionTimestamp != nil {
		replicas, err := c.ds.ListVolumeReplicasRO(name)
		if err != nil {
			return kit.Result{}, err
		}
		if n := datastore.ReplicasNode(replicas); n != "" {
			preferred = n
		} else if n := c.cloneSourceNode(v); n != "" {
			// A new clone is made where its source's replicas are.
			preferred = n
		} else if n := v.Annotations[types.AnnotationSelectedNode]; n != "" {
			// A new volume asked for a node (the CSI driver's topology):
			// its manager makes the replicas, when it is up.
			preferred = n
		}
	}
	if !c.ownership.Responsible(v.Status.OwnerID, preferred) {
		if _, running := c.instances.Get(name); running {
			return kit.Result{}, c.instances.Stop(name)
		}
		return kit.Result{}, nil
	}
	if claimed, err := c.ownership.Claim(c.Logger.WithField("volume", name), v.Status.OwnerID, func(owner string) error {
		claimed := v.DeepCopy()
		claimed.Status.OwnerID = owner
		_, err := c.ds.UpdateVolumeStatus(ctx, claimed)
		return err
	}); claimed || err != nil {
		return kit.Result{}, err
	}
	if v.DeletionTimestamp != nil {
		return c.cleanup(ctx, v)
	}
	if !kit.HasFinalizer(v) {
		// The volume's data is cleaned up (cleanup, above) before it goes.
		updated := v.DeepCopy()
		kit.AddFinalizer(updated)
		if _, err := c.ds.UpdateVolume(ctx, updated); err != nil {
			return kit.Result{}, fmt.Errorf("add the finalizer of volume %s: %w", name, err)
		}
		return kit.Result{}, nil
	}
	if _, changed := datastore.FixupRecurringJobLabels(v.Labels); changed {
		_, err := c.ds.UpdateVolumeLabels(ctx, name, func(map[string]string) bool { return false })
		if err != nil && !apierrors.IsNotFound(err) {
			return kit.Result{}, fmt.Errorf("fix the recurring job labels of volume %s: %w", name, err)
		}
		return kit.Result{}, nil
	}
	err = c.syncAttachment(ctx, v)
	if c.restoring(name) {
		// Show its progress; its end brings the volume back at once.
		return kit.Result{RequeueAfter: restoreProgressInterval}, err
	}
	if c.cloning(name) {
		return kit.Result{RequeueAfter: cloneProgressInterval}, err
	}
	return kit.Result{}, err
}
