package volume

import (
	"context"
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/scheduler"
	"github.com/cadence-storage/longhorn-manager/types"
)

// placeReplicas creates the Replicas the volume misses, one by one, each
// on the disk the replica scheduler picks given those placed before it
// (so three replicas go to three nodes when anti-affinity asks for it).
// Replicas marked failed do not count. A replica that no disk can take is
// not created: unscheduled says why, node by node, and the next sync
// tries again. A volume whose data exists gets one new replica at a time,
// while its engine runs here, to be rebuilt into it (replacement.go). It
// returns replicas with those it created.
func (c *Controller) placeReplicas(ctx context.Context, v *longhorn.Volume, replicas []*longhorn.Replica, attachTo string) ([]*longhorn.Replica, error, error) {
	active := countActive(replicas)
	if active >= v.Spec.NumberOfReplicas {
		return replicas, nil, nil
	}
	// A replica to be rebuilt whose node went down before it joined is
	// given up (it holds nothing), and another placed in its place.
	for i, r := range replicas {
		if awaitingRebuild(r) && r.DeletionTimestamp == nil && !c.ownership.IsUp(r.Spec.NodeID) {
			why := fmt.Sprintf("its node %s went down before it was rebuilt", r.Spec.NodeID)
			if err := c.markNodeDown(ctx, v, replicas, i, why); err != nil {
				return nil, nil, err
			}
			active--
		}
	}
	want := v.Spec.NumberOfReplicas
	replacing := holdsData(replicas)
	if replacing {
		if why, retry := c.replacementRefusal(v, replicas); why != "" {
			if retry > 0 {
				c.Queue.AddAfter(c.ds.Namespace()+"/"+v.Name, retry)
			}
			return replicas, errors.New(why), nil
		}
		want = active + 1
	}
	settings, err := c.ds.SchedulingSettings()
	if err != nil {
		return nil, nil, fmt.Errorf("volume %s: read the scheduling settings: %w", v.Name, err)
	}
	nodes, err := c.ds.ListNodesRO()
	if err != nil {
		return nil, nil, err
	}
	scheduled, err := c.ds.ScheduledOnDisks("")
	if err != nil {
		return nil, nil, err
	}
	have := map[string]bool{}
	for _, r := range replicas {
		have[r.Name] = true
	}
	req := scheduler.Request{Volume: v, Nodes: nodes, IsUp: c.ownership.IsUp, Scheduled: scheduled,
		Prefer: c.preferredReplicaNode(v, attachTo), Rules: scheduler.Resolve(settings, v)}
	if why := keptOnOneNode(v); why != "" {
		// Its replicas stay on this node, sharing it (and a disk when
		// they must) whatever anti-affinity asks.
		req.Nodes = onlyNode(nodes, c.ownership.NodeID)
		req.Rules.NodeSoft, req.Rules.ZoneSoft, req.Rules.DiskSoft = true, true, true
		c.Logger.WithFields(logrus.Fields{"volume": v.Name, "node": c.ownership.NodeID, "why": why}).Debug("Placing the volume's replicas on one node")
	}
	for i := 0; active < want; i++ {
		name := fmt.Sprintf("%s-r-%d", v.Name, i)
		if have[name] {
			continue
		}
		req.Existing = replicas
		disk, err := scheduler.Place(req)
		if err != nil {
			c.Logger.WithFields(logrus.Fields{"volume": v.Name, "replica": name}).WithError(err).Debug("Replica not scheduled")
			return replicas, err, nil
		}
		r := &longhorn.Replica{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{types.LabelVolume: v.Name}, OwnerReferences: kit.OwnedBy(v)},
			Spec: longhorn.ReplicaSpec{
				InstanceSpec: longhorn.InstanceSpec{VolumeName: v.Name, VolumeSize: v.Spec.Size, NodeID: disk.Node, DataEngine: longhorn.DataEngineTypeV1},
				DiskID:       disk.UUID, DiskPath: disk.Path, DataDirectoryName: replicaDataDir(v, i),
				BackingImage: v.Spec.BackingImage, Active: true,
			},
		}
		if replacing {
			r.Annotations = map[string]string{types.AnnotationRebuildTarget: "true"}
		}
		created, err := c.ds.CreateReplica(ctx, r)
		if apierrors.IsAlreadyExists(err) {
			// Made by an earlier sync, whose write the cache does not show
			// yet: where it is counts for the next one's placement.
			if created, err = c.ds.GetReplicaFresh(ctx, name); err != nil {
				return nil, nil, fmt.Errorf("read replica %s: %w", name, err)
			}
			replicas = append(replicas, created)
			active++
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("create replica %s: %w", name, err)
		}
		replicas = append(replicas, created)
		active++
		scheduled[disk.UUID] += v.Spec.Size
		c.Logger.WithFields(logrus.Fields{"volume": v.Name, "replica": name, "node": disk.Node, "disk": disk.Path}).Info("Created replica")
	}
	return replicas, nil, nil
}

// preferredReplicaNode is the node the scheduler takes among equally good
// ones: where the engine is to run, or else where the volume is wanted
// (the CSI driver's selected node, a clone's source), or else this node.
// An engine reads snapshots' layers from a replica of its own node
// (backups, clones), so one replica there is worth having.
func (c *Controller) preferredReplicaNode(v *longhorn.Volume, attachTo string) string {
	switch {
	case attachTo != "":
		return attachTo
	case v.Annotations[types.AnnotationSelectedNode] != "":
		return v.Annotations[types.AnnotationSelectedNode]
	}
	if n := c.cloneSourceNode(v); n != "" {
		return n
	}
	return c.ownership.NodeID
}

// keptOnOneNode says why v's replicas all go to the node of the manager
// that makes them ("" when they are spread): a volume still to be
// restored from a backup or made a clone is written by an engine of that
// node on replicas of its own disks (remoteAllowed), and a strict-local
// one is kept where its engine runs.
func keptOnOneNode(v *longhorn.Volume) string {
	switch {
	case v.Spec.DataLocality == longhorn.DataLocalityStrictLocal:
		return "its dataLocality is strict-local: its one replica is where its engine runs"
	case cloneRequired(v):
		return "it is to be made a clone of " + v.Spec.DataSource
	case v.Status.RestoreRequired || v.Spec.FromBackup != "" && !v.Status.RestoreInitiated:
		return "it is to be restored from backup " + v.Spec.FromBackup
	}
	return ""
}

func onlyNode(nodes []*longhorn.Node, name string) []*longhorn.Node {
	for _, n := range nodes {
		if n.Name == name {
			return []*longhorn.Node{n}
		}
	}
	return nil
}
