// Package replica serves this node's replicas to the engines of other
// nodes (docs/design-data-plane.md, "Replicas on other nodes"): a replica
// on this node's disks whose volume's engine is to run on another node is
// served by the node's instance manager (or this process, when the
// engines run in it) over the replica protocol, and its Replica's status
// says where (storageIP and port), which the engine's node reads to reach
// it. The volume controller of the engine's node writes everything else
// of the Replica's status.
package replica

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	enginereplica "github.com/cadence-storage/longhorn-manager/engine/replica"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Controller serves this node's replicas to engines on other nodes.
//
// Ownership: the node of spec.nodeID serves its replica and writes the
// Replica's status.ip, storageIP and port; nothing else writes them.
type Controller struct {
	*kit.Base
	ds     *datastore.DataStore
	nodeID string
	server instance.ReplicaServer
	clock  clock.PassiveClock

	// served are the replicas the node serves, as this controller last
	// made or found them (Adopt): a replica not to be served costs no
	// call to the server unless it is among them.
	mu     sync.Mutex
	served map[string]bool
	// adopted: Adopt listed what the node served at start; until then
	// every replica not to be served is stopped (StopReplica of one not
	// served does nothing), so none stays held by its lock unknown.
	adopted bool
}

// NewController wires the controller to the Replica and Engine informers:
// a replica is synced when it changes and when its volume's Engine does.
// server is nil when the node serves no replicas.
func NewController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, nodeID string,
	server instance.ReplicaServer) *Controller {
	replicaInformer := inf.Longhorn.Longhorn().V1beta2().Replicas().Informer()
	engineInformer := inf.Longhorn.Longhorn().V1beta2().Engines().Informer()
	volumeInformer := inf.Longhorn.Longhorn().V1beta2().Volumes().Informer()
	c := &Controller{ds: ds, nodeID: nodeID, server: server, served: map[string]bool{}, clock: clock.RealClock{}}
	c.Base = kit.NewBase("longhorn-replica", logger, metrics, c.sync, replicaInformer.HasSynced, engineInformer.HasSynced, volumeInformer.HasSynced,
		inf.Longhorn.Longhorn().V1beta2().BackingImages().Informer().HasSynced)
	replicaInformer.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			r, ok := obj.(*longhorn.Replica)
			return ok && r.Spec.NodeID == nodeID
		},
		Handler: c.EventHandler(),
	})
	engineInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueEngineReplicas,
		// Only what wanted reads: not each mirror of a running engine.
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*longhorn.Engine)
			n, ok2 := cur.(*longhorn.Engine)
			if ok1 && ok2 && o.Spec.NodeID == n.Spec.NodeID && o.Spec.DesireState == n.Spec.DesireState &&
				o.Status.CurrentState == n.Status.CurrentState && o.Status.OwnerID == n.Status.OwnerID {
				return
			}
			c.enqueueEngineReplicas(cur)
		},
		DeleteFunc: c.enqueueEngineReplicas,
	})
	// A backing image's file ready on a disk: its replicas there may be
	// served.
	backingImageInformer := inf.Longhorn.Longhorn().V1beta2().BackingImages().Informer()
	backingImageInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueBackingImageReplicas,
		UpdateFunc: func(_, cur any) { c.enqueueBackingImageReplicas(cur) },
	})
	// A volume being deleted: this node deletes its replicas' data.
	volumeInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueDeletedVolumeReplicas,
		UpdateFunc: func(old, cur any) {
			if o, ok := old.(*longhorn.Volume); ok && o.DeletionTimestamp == nil {
				c.enqueueDeletedVolumeReplicas(cur)
			}
		},
	})
	return c
}

// enqueueBackingImageReplicas syncs this node's replicas on a backing
// image.
func (c *Controller) enqueueBackingImageReplicas(obj any) {
	bi, ok := obj.(*longhorn.BackingImage)
	if !ok {
		return
	}
	c.enqueueLocal(c.ds.ListBackingImageReplicasRO(bi.Name))
}

// enqueueDeletedVolumeReplicas syncs this node's replicas of a volume
// being deleted.
func (c *Controller) enqueueDeletedVolumeReplicas(obj any) {
	v, ok := obj.(*longhorn.Volume)
	if !ok || v.DeletionTimestamp == nil {
		return
	}
	c.enqueueLocal(c.ds.ListVolumeReplicasRO(v.Name))
}

// enqueueLocal syncs those of replicas on this node.
func (c *Controller) enqueueLocal(replicas []*longhorn.Replica, err error) {
	if err != nil {
		return
	}
	for _, r := range replicas {
		if r.Spec.NodeID == c.nodeID {
			c.Enqueue(r)
		}
	}
}

// enqueueEngineReplicas syncs this node's replicas of the Engine's volume.
func (c *Controller) enqueueEngineReplicas(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	e, ok := obj.(*longhorn.Engine)
	if !ok {
		return
	}
	c.enqueueLocal(c.ds.ListVolumeReplicasRO(e.Spec.VolumeName))
}

// Adopt enqueues every replica the node serves now (an instance manager
// outlives the manager): one whose Replica is gone, or no longer to be
// served, is stopped by its sync.
func (c *Controller) Adopt() error {
	if c.server == nil {
		return nil
	}
	served, _, err := c.server.ListReplicas()
	if err != nil {
		return err
	}
	for _, sr := range served {
		c.setServed(sr.Name, true)
		c.Queue.Add(c.ds.Namespace() + "/" + sr.Name)
	}
	c.mu.Lock()
	c.adopted = true
	c.mu.Unlock()
	return nil
}

func (c *Controller) setServed(name string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on {
		c.served[name] = true
	} else {
		delete(c.served, name)
	}
}

func (c *Controller) isServed(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.adopted || c.served[name]
}

func (c *Controller) sync(ctx context.Context, key string) (kit.Result, error) {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, err
	}
	log := c.Logger.WithField("replica", name)
	r, err := c.ds.GetReplicaRO(name)
	if apierrors.IsNotFound(err) {
		return kit.Result{}, c.stop(name, log, "its Replica is gone")
	}
	if err != nil {
		return kit.Result{}, err
	}
	if r.Spec.NodeID != c.nodeID {
		return kit.Result{}, c.stop(name, log, "it is not on this node")
	}
	log = log.WithField("volume", r.Spec.VolumeName)
	e, err := c.ds.GetEngineRO(datastore.EngineName(r.Spec.VolumeName))
	if err != nil && !apierrors.IsNotFound(err) {
		return kit.Result{}, err
	}
	if apierrors.IsNotFound(err) {
		e = nil
	}
	v, err := c.ds.GetVolumeRO(r.Spec.VolumeName)
	if err != nil && !apierrors.IsNotFound(err) {
		return kit.Result{}, err
	}
	if apierrors.IsNotFound(err) {
		v = nil
	}
	if volumeDeleted(r, v) {
		return c.deleteData(ctx, r, log)
	}
	want, why := c.wanted(r, e)
	if !want {
		if err := c.stop(name, log, why); err != nil {
			return kit.Result{}, err
		}
		return kit.Result{}, c.writeAddress(ctx, r, "")
	}
	if v == nil {
		return kit.Result{}, fmt.Errorf("replica %s: its volume %s is not found", r.Name, r.Spec.VolumeName)
	}
	dir, err := c.replicaDir(r)
	if err != nil {
		return kit.Result{}, err
	}
	rd := instance.ReplicaDir{Name: r.Name, Dir: dir, New: r.Spec.HealthyAt == ""}
	if r.Spec.BackingImage != "" {
		// The image's file on this replica's disk, which the volume's
		// manager asked for (its engine waits until every replica's is
		// ready, so it is, unless it went since).
		bi, err := c.ds.GetBackingImageRO(r.Spec.BackingImage)
		if err != nil {
			return kit.Result{}, fmt.Errorf("replica %s: backing image %s: %w", r.Name, r.Spec.BackingImage, err)
		}
		file, waiting := datastore.ReplicaBackingFile(bi, r)
		if file == nil {
			log.WithField("backingImage", bi.Name).Debug("Waiting for the backing image's file before serving the replica: " + waiting)
			return kit.Result{}, nil
		}
		rd.Backing = file
	}
	if c.server == nil {
		return kit.Result{}, fmt.Errorf("replica %s: this node serves no replica to another node's engine (its manager runs with an empty --replica-address)", r.Name)
	}
	served, err := c.server.ServeReplica(v.Name, string(v.UID), rd, r.Spec.VolumeSize)
	if err != nil {
		return kit.Result{}, fmt.Errorf("serve replica %s to the engine on node %s: %w", r.Name, e.Spec.NodeID, err)
	}
	c.setServed(r.Name, true)
	return kit.Result{}, c.writeAddress(ctx, r, served.Address)
}

// wanted says whether replica r is to be served, for the engine e of its
// volume, and why not: its engine is to run on another node, and it is
// not marked failed. A replica served while its engine still runs
// elsewhere is served until that engine stopped, unless the engine is
// to run here (then the engine here opens it, and the one elsewhere is a
// stale one, which the new engine's term fences).
func (c *Controller) wanted(r *longhorn.Replica, e *longhorn.Engine) (bool, string) {
	switch {
	case r.DeletionTimestamp != nil:
		return false, "it is being deleted"
	case r.Spec.FailedAt != "":
		return false, "it is marked failed"
	case e == nil:
		return false, "its volume has no engine"
	case e.Spec.NodeID == c.nodeID:
		return false, "its engine runs on this node, which opens it itself"
	case e.Spec.NodeID != "" && e.Spec.DesireState == longhorn.InstanceStateRunning:
		return true, ""
	case e.Status.CurrentState == longhorn.InstanceStateRunning && e.Status.OwnerID != c.nodeID:
		return true, "" // stopping elsewhere: served until it stopped
	}
	return false, "its engine is not to run on another node"
}

// stop stops serving replica name, when it is served.
func (c *Controller) stop(name string, log *logrus.Entry, why string) error {
	if c.server == nil || !c.isServed(name) {
		return nil
	}
	if err := c.server.StopReplica(name); err != nil {
		return fmt.Errorf("stop serving replica %s: %w", name, err)
	}
	c.setServed(name, false)
	log.WithField("why", why).Info("Stopped serving the replica to another node's engine")
	return nil
}

// replicaDir is the replica's folder on this node's disk that spec.diskID
// and diskPath name; an error when this node has no such disk.
func (c *Controller) replicaDir(r *longhorn.Replica) (string, error) {
	node, err := c.ds.GetNodeRO(c.nodeID)
	if err != nil {
		return "", fmt.Errorf("node %s: %w", c.nodeID, err)
	}
	for name, d := range node.Spec.Disks {
		if st := node.Status.DiskStatus[name]; d.Path == r.Spec.DiskPath && st != nil && st.DiskUUID == r.Spec.DiskID {
			return filepath.Join(r.Spec.DiskPath, enginereplica.ReplicasFolder, r.Spec.DataDirectoryName), nil
		}
	}
	return "", fmt.Errorf("replica %s is on disk %s at %s, which is not a disk of node %s (by that UUID at that path)", r.Name, r.Spec.DiskID, r.Spec.DiskPath, c.nodeID)
}

// writeAddress records in the Replica's status where it is served (""
// when it is not).
func (c *Controller) writeAddress(ctx context.Context, r *longhorn.Replica, address string) error {
	st := r.Status.DeepCopy()
	st.IP, st.StorageIP, st.Port = "", "", 0
	if address != "" {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return fmt.Errorf("replica %s: the served address %q: %w", r.Name, address, err)
		}
		st.IP, st.StorageIP = host, host
		if st.Port, err = strconv.Atoi(port); err != nil {
			return fmt.Errorf("replica %s: the served address %q: %w", r.Name, address, err)
		}
	}
	if !kit.StatusChanged(st, &r.Status) {
		return nil
	}
	updated := r.DeepCopy()
	updated.Status = *st
	if _, err := c.ds.UpdateReplicaStatus(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status of replica %s: %w", r.Name, err)
	}
	c.Logger.WithFields(logrus.Fields{"replica": r.Name, "volume": r.Spec.VolumeName, "address": address}).Info("Recorded where the replica is served")
	return nil
}

// ServedAddress is where a Replica's status says its node serves it, ""
// when it does not.
func ServedAddress(r *longhorn.Replica) string {
	if r.Status.StorageIP == "" || r.Status.Port == 0 {
		return ""
	}
	return net.JoinHostPort(r.Status.StorageIP, strconv.Itoa(r.Status.Port))
}
