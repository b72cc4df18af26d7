package datastore

import (
	"fmt"
	"strconv"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// DiskRoom is the room a ready disk has for replicas: its size less its
// reserved storage, scaled by storage-over-provisioning-percentage (as
// Longhorn's replica scheduling scales it), less the sizes
// (spec.volumeSize) of the replicas it holds. Replicas are thin, so this
// bounds what volumes may grow to, not what they take at first.
type DiskRoom struct {
	Room       int64
	Node, Disk string
	Percent    int
	// Known is false while no ready disk has reported its size (a node
	// starting): nothing is refused then.
	Known bool
}

// RoomiestDisk is the DiskRoom of the ready disk with the most room, or,
// with diskUUID set, of that disk alone; the replicas of volume (when not
// "") are not counted against it.
func (ds *DataStore) RoomiestDisk(diskUUID, volume string) (DiskRoom, error) {
	nodes, err := ds.ListNodesRO()
	if err != nil {
		return DiskRoom{}, err
	}
	value, err := ds.GetSettingValue(types.SettingNameStorageOverProvisioningPercentage)
	if err != nil {
		return DiskRoom{}, err
	}
	percent, err := strconv.Atoi(value)
	if err != nil || percent < 0 {
		return DiskRoom{}, fmt.Errorf("setting %s: %q is not a percentage", types.SettingNameStorageOverProvisioningPercentage, value)
	}
	scheduled, err := ds.ScheduledOnDisks(volume)
	if err != nil {
		return DiskRoom{}, err
	}
	best := DiskRoom{Percent: percent}
	for _, n := range nodes {
		for name, spec := range n.Spec.Disks {
			st := n.Status.DiskStatus[name]
			if st == nil || st.DiskUUID == "" || st.StorageMaximum <= 0 || !diskReady(st) || (diskUUID != "" && st.DiskUUID != diskUUID) {
				continue
			}
			room := (st.StorageMaximum-spec.StorageReserved)/100*int64(percent) - scheduled[st.DiskUUID]
			if !best.Known || room > best.Room {
				best = DiskRoom{Room: room, Node: n.Name, Disk: name, Percent: percent, Known: true}
			}
		}
	}
	return best, nil
}

// ScheduledOnDisks is, by disk UUID, the sizes (spec.volumeSize) of the
// replicas each disk holds that are not being deleted: what a disk's room
// is reduced by, and its status's storageScheduled. The replicas of
// volume (when not "") are not counted.
func (ds *DataStore) ScheduledOnDisks(volume string) (map[string]int64, error) {
	replicas, err := ds.ListReplicasRO()
	if err != nil {
		return nil, err
	}
	scheduled := map[string]int64{}
	for _, r := range replicas {
		if r.DeletionTimestamp == nil && (volume == "" || r.Spec.VolumeName != volume) {
			scheduled[r.Spec.DiskID] += r.Spec.VolumeSize
		}
	}
	return scheduled, nil
}

// Holds says whether the disk has room for replicas of size bytes each;
// an unknown disk holds anything.
func (r DiskRoom) Holds(size int64, replicas int) bool {
	if !r.Known || size <= 0 || replicas <= 0 {
		return true
	}
	need := size * int64(replicas)
	return need/int64(replicas) == size && need <= r.Room
}

// Describe says where the room is and how it is counted, for messages.
func (r DiskRoom) Describe() string {
	return fmt.Sprintf("disk %s of node %s: its size less reserved storage, times the %s setting of %d%%, less the replicas it holds",
		r.Disk, r.Node, types.SettingNameStorageOverProvisioningPercentage, r.Percent)
}

func diskReady(st *longhorn.DiskStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == longhorn.ConditionTypeReady {
			return c.Status == longhorn.ConditionStatusTrue
		}
	}
	return false
}
