package volume

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
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
	return filepath.Join(r.Spec.DiskPath, replica.ReplicasFolder, r.Spec.DataDirectoryName)
}

// ensureObjects creates the volume's Replicas (on a ready disk of this
// node) and its Engine, named <volume>-r-<n> and <volume>-e-0.
// Missing replicas are created only while every existing one is on this
// node: a volume's replicas stay together on the node that holds them,
// where its engine opens them. attachTo is the node the Engine is to run
// on ("" for none).
func (c *Controller) ensureObjects(ctx context.Context, v *longhorn.Volume, attachTo string) ([]*longhorn.Replica, *longhorn.Engine, error) {
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
func (c *Controller) readyDisk() (uuid, path string, err error) {
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
