package node

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/diskconfig"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

const (
	// heartbeatPeriod is how often a manager renews its node's Lease.
	heartbeatPeriod = 10 * time.Second
	// HeartbeatDuration is how long a renewal keeps the node Ready.
	HeartbeatDuration = 40 * time.Second
	// diskProbePeriod is how often this node's disks are probed.
	diskProbePeriod = 30 * time.Second
)

// Controller keeps Node status current: the Ready condition of every
// node from its manager's heartbeat Lease, and, for this node, the disks'
// identity, space and conditions.
//
// Ownership: every node writes its own disks and heartbeat; any node may
// mark a peer not Ready once that peer's heartbeat is stale (the write
// carries the resource version, so a peer that came back wins).
type Controller struct {
	*kit.Base
	ds     *datastore.DataStore
	nodeID string
	clock  clock.WithTicker

	// probed is when this node's disks were last probed, and for which
	// generation of its spec; only this node's key (never two syncs at
	// once) touches them.
	probed           time.Time
	probedGeneration int64
}

// NewController wires the controller to the Node and Lease informers.
func NewController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, nodeID string, clk clock.WithTicker) *Controller {
	nodeInformer := inf.Longhorn.Longhorn().V1beta2().Nodes().Informer()
	leaseInformer := inf.Kube.Coordination().V1().Leases().Informer()
	replicaInformer := inf.Longhorn.Longhorn().V1beta2().Replicas().Informer()
	c := &Controller{ds: ds, nodeID: nodeID, clock: clk}
	c.Base = kit.NewBase("longhorn-node", logger, metrics, c.sync, nodeInformer.HasSynced, leaseInformer.HasSynced, replicaInformer.HasSynced)
	nodeInformer.AddEventHandler(c.EventHandler())
	// A replica placed on, grown on or removed from this node's disks
	// changes their storageScheduled, which the CSI driver's GetCapacity
	// reads as soon as a volume is made.
	replicaInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueReplicaNode,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*longhorn.Replica)
			n, ok2 := cur.(*longhorn.Replica)
			if ok1 && ok2 && o.Spec.VolumeSize == n.Spec.VolumeSize && o.Spec.DiskID == n.Spec.DiskID &&
				o.Spec.NodeID == n.Spec.NodeID && (o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil) {
				return
			}
			c.enqueueReplicaNode(old)
			c.enqueueReplicaNode(cur)
		},
		DeleteFunc: c.enqueueReplicaNode,
	})
	leaseInformer.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			lease, ok := obj.(*coordinationv1.Lease)
			if !ok {
				tomb, ok := obj.(cache.DeletedFinalStateUnknown)
				if !ok {
					return false
				}
				lease, ok = tomb.Obj.(*coordinationv1.Lease)
				if !ok {
					return false
				}
			}
			return lease.Labels[types.LabelNode] != ""
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueueLeaseNode,
			UpdateFunc: func(_, cur any) { c.enqueueLeaseNode(cur) },
			DeleteFunc: c.enqueueLeaseNode,
		},
	})
	return c
}

func (c *Controller) enqueueLeaseNode(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	c.Queue.Add(c.ds.Namespace() + "/" + lease.Labels[types.LabelNode])
}

// enqueueReplicaNode syncs this node when the replica is on it.
func (c *Controller) enqueueReplicaNode(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if r, ok := obj.(*longhorn.Replica); ok && r.Spec.NodeID == c.nodeID {
		c.Queue.Add(c.ds.Namespace() + "/" + c.nodeID)
	}
}

// Register creates this node's Node object with one disk at dataDir, if it
// does not exist yet. An existing Node is left as the user configured it.
func (c *Controller) Register(ctx context.Context, dataDir string) error {
	log := c.Logger.WithField("node", c.nodeID)
	if _, err := c.ds.GetNodeFresh(ctx, c.nodeID); err == nil {
		log.Info("Node already registered")
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read node %s: %w", c.nodeID, err)
	}
	cfg, err := diskconfig.Ensure(dataDir, "")
	if err != nil {
		return fmt.Errorf("prepare default disk at %s: %w", dataDir, err)
	}
	diskName := cfg.DiskName
	if diskName == "" {
		diskName = "default-disk-" + cfg.DiskUUID[:8]
	}
	node := &longhorn.Node{
		ObjectMeta: metav1.ObjectMeta{Name: c.nodeID},
		Spec: longhorn.NodeSpec{
			Name:            c.nodeID,
			AllowScheduling: true,
			Disks: map[string]longhorn.DiskSpec{
				diskName: {Type: longhorn.DiskTypeFilesystem, Path: dataDir, AllowScheduling: true},
			},
		},
	}
	if _, err := c.ds.CreateNode(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node %s: %w", c.nodeID, err)
	}
	log.WithFields(logrus.Fields{"disk": diskName, "path": dataDir, "diskUUID": cfg.DiskUUID}).Info("Registered node with its default disk")
	return nil
}

// RunHeartbeat renews this node's Lease until ctx ends.
func (c *Controller) RunHeartbeat(ctx context.Context) {
	log := c.Logger.WithField("node", c.nodeID)
	ticker := c.clock.NewTicker(heartbeatPeriod)
	defer ticker.Stop()
	for {
		if err := c.ds.RenewHeartbeat(ctx, c.nodeID, HeartbeatDuration, c.clock.Now()); err != nil && ctx.Err() == nil {
			log.WithError(err).Warn("Failed to renew the node heartbeat")
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

func (c *Controller) sync(ctx context.Context, key string) (kit.Result, error) {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, err
	}
	node, err := c.ds.GetNodeRO(name)
	if apierrors.IsNotFound(err) {
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	lease, err := c.ds.GetHeartbeatRO(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return kit.Result{}, err
	}
	if apierrors.IsNotFound(err) {
		lease = nil
	}
	now := c.clock.Now()

	var again kit.Result
	status := node.Status.DeepCopy()
	status.Conditions = nodeReadyCondition(status.Conditions, lease, now)
	if name == c.nodeID {
		scheduled, err := c.ds.ScheduledOnDisks("")
		if err != nil {
			return kit.Result{}, err
		}
		status.Conditions = kit.SetCondition(status.Conditions, longhorn.ConditionTypeSchedulable,
			kit.BoolStatus(node.Spec.AllowScheduling), schedulingReason(node.Spec.AllowScheduling), "", now)
		// Free space moves with every write to the disk, by anyone: probe
		// once a period (or when the disks change), not on every sync, or
		// each status write would bring the next.
		if due := c.probed.Add(diskProbePeriod); !now.Before(due) || node.Generation != c.probedGeneration {
			status.DiskStatus = c.probeDisks(node, now)
			c.readTopology(ctx, status)
			c.probed, c.probedGeneration = now, node.Generation
			again.RequeueAfter = diskProbePeriod
		} else {
			again.RequeueAfter = due.Sub(now)
		}
		setScheduled(status.DiskStatus, scheduled)
	} else if _, staleAt := heartbeatFresh(lease, now); staleAt.After(now) {
		// Look again when the peer's heartbeat would go stale.
		again.RequeueAfter = staleAt.Sub(now) + time.Second
	}

	if !kit.StatusChanged(&node.Status, status) {
		return again, nil
	}
	wasReady := kit.GetCondition(node.Status.Conditions, longhorn.ConditionTypeReady).Status
	updated := node.DeepCopy()
	updated.Status = *status
	if _, err := c.ds.UpdateNodeStatus(ctx, updated); err != nil {
		if name == c.nodeID {
			// The probe's result is lost: the retry probes again.
			c.probed = time.Time{}
		}
		return again, fmt.Errorf("update status of node %s: %w", name, err)
	}
	if ready := kit.GetCondition(status.Conditions, longhorn.ConditionTypeReady); ready.Status != wasReady {
		c.Logger.WithFields(logrus.Fields{"node": name, "ready": ready.Status, "reason": ready.Reason}).Info("Node readiness changed")
	}
	for disk, st := range status.DiskStatus {
		ready := kit.GetCondition(st.Conditions, longhorn.ConditionTypeReady)
		if old := node.Status.DiskStatus[disk]; old == nil || kit.GetCondition(old.Conditions, longhorn.ConditionTypeReady).Status != ready.Status {
			c.Logger.WithFields(logrus.Fields{"node": name, "disk": disk, "path": node.Spec.Disks[disk].Path,
				"ready": ready.Status, "reason": ready.Reason, "message": ready.Message}).Info("Disk readiness changed")
		}
	}
	return again, nil
}

// readTopology copies the Kubernetes node's region and zone labels into
// the node's status, as Longhorn does: the replica scheduler's zone
// anti-affinity reads them. A failed read keeps what the status has.
func (c *Controller) readTopology(ctx context.Context, status *longhorn.NodeStatus) {
	t, err := c.ds.KubeNodeTopology(ctx, c.nodeID)
	if err != nil {
		c.Logger.WithField("node", c.nodeID).WithError(err).Debug("Kept the node's region and zone")
		return
	}
	if t.Found {
		status.Region, status.Zone = t.Region, t.Zone
	}
}

// setScheduled sets each disk's storageScheduled, the sizes of the
// replicas it holds (datastore.ScheduledOnDisks, by disk UUID), as
// Longhorn's node shows it: the CSI driver's GetCapacity takes it from
// the disk's room.
func setScheduled(disks map[string]*longhorn.DiskStatus, scheduled map[string]int64) {
	for _, st := range disks {
		if st != nil {
			st.StorageScheduled = 0
			if st.DiskUUID != "" {
				st.StorageScheduled = scheduled[st.DiskUUID]
			}
		}
	}
}

func schedulingReason(allowed bool) string {
	if allowed {
		return ""
	}
	return "SchedulingDisabled"
}

// probeDisks probes every disk in the node's spec and drops the status of
// disks that were removed from it.
func (c *Controller) probeDisks(node *longhorn.Node, now time.Time) map[string]*longhorn.DiskStatus {
	out := make(map[string]*longhorn.DiskStatus, len(node.Spec.Disks))
	for name, spec := range node.Spec.Disks {
		info, err := probeDisk(spec.Path, name)
		out[name] = diskStatus(spec, node.Status.DiskStatus[name], diskProbe{info: info, err: err}, now)
	}
	return out
}
