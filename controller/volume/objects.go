package volume

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"

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

// ensureObjects creates the volume's missing Replicas, each where the
// replica scheduler places it (placeReplicas), and its Engine, named
// <volume>-r-<n> and <volume>-e-0. attachTo is the node the Engine is to
// run on ("" for none). unscheduled says why replicas numberOfReplicas
// asks for could not be placed (nil when none is missing).
func (c *Controller) ensureObjects(ctx context.Context, v *longhorn.Volume, attachTo string) (replicas []*longhorn.Replica, e *longhorn.Engine, unscheduled error, err error) {
	replicas, err = c.ds.ListVolumeReplicasRO(v.Name)
	if err != nil {
		return nil, nil, nil, err
	}
	if replicas, unscheduled, err = c.placeReplicas(ctx, v, replicas, attachTo); err != nil {
		return nil, nil, nil, err
	}
	sort.Slice(replicas, func(i, j int) bool { return replicas[i].Name < replicas[j].Name })

	addresses := map[string]string{}
	for _, r := range replicas {
		addresses[r.Name] = replicaDir(r)
	}
	name := datastore.EngineName(v.Name)
	e, err = c.ds.GetEngineRO(name)
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
			return nil, nil, nil, fmt.Errorf("create engine %s: %w", name, err)
		}
		return replicas, e, unscheduled, nil
	}
	if err != nil {
		return nil, nil, nil, err
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
			return nil, nil, nil, err
		}
	}
	return replicas, e, unscheduled, nil
}
