package manager

import (
	"errors"
	"fmt"
	"strconv"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// checkCapacity refuses a volume that no ready disk can hold. A volume's
// replicas all live on one disk of the node it attaches to, so the bound
// is the largest room any ready disk has for replicas: its size less its
// reserved storage, scaled by storage-over-provisioning-percentage (as
// Longhorn's replica scheduling scales it), less the sizes of the
// replicas it already holds. Replicas are thin, so this bounds what the
// volume may grow to, not what it takes at first. While no disk has
// reported its size (a node starting), nothing is refused here.
// ErrNoCapacity marks an invalid input refused because no disk has room
// for it.
var ErrNoCapacity = errors.New("no disk has room")

func (m *VolumeManager) checkCapacity(spec longhorn.VolumeSpec) error {
	return m.checkRoom(spec, "", "")
}

// checkCapacityOn is checkCapacity on the one disk (by UUID) that holds
// volume's replicas, which the volume's own replicas do not count against.
func (m *VolumeManager) checkCapacityOn(spec longhorn.VolumeSpec, diskUUID, volume string) error {
	return m.checkRoom(spec, diskUUID, volume)
}

// checkRoom is checkCapacity, on every ready disk or only diskUUID, less
// the replicas of volume (none when empty).
func (m *VolumeManager) checkRoom(spec longhorn.VolumeSpec, diskUUID, volume string) error {
	nodes, err := m.ds.ListNodesRO()
	if err != nil {
		return err
	}
	percent, err := m.overProvisioningPercentage()
	if err != nil {
		return err
	}
	replicas, err := m.ds.ListReplicasRO()
	if err != nil {
		return err
	}
	scheduled := map[string]int64{}
	for _, r := range replicas {
		if r.DeletionTimestamp == nil && (volume == "" || r.Spec.VolumeName != volume) {
			scheduled[r.Spec.DiskID] += r.Spec.VolumeSize
		}
	}
	var best struct {
		room       int64
		node, disk string
		known      bool
	}
	for _, n := range nodes {
		for name, spec := range n.Spec.Disks {
			st := n.Status.DiskStatus[name]
			if st == nil || st.DiskUUID == "" || st.StorageMaximum <= 0 || !diskReady(st) || (diskUUID != "" && st.DiskUUID != diskUUID) {
				continue
			}
			room := (st.StorageMaximum-spec.StorageReserved)/100*int64(percent) - scheduled[st.DiskUUID]
			if !best.known || room > best.room {
				best.room, best.node, best.disk, best.known = room, n.Name, name, true
			}
		}
	}
	if !best.known {
		return nil
	}
	if spec.Size <= 0 || spec.NumberOfReplicas <= 0 {
		return nil // refused elsewhere, naming the field
	}
	which := "the most any ready disk has room for"
	if diskUUID != "" {
		which = "the disk that holds the volume's replicas has room for"
	}
	if need := spec.Size * int64(spec.NumberOfReplicas); need/int64(spec.NumberOfReplicas) != spec.Size || need > best.room {
		return fmt.Errorf("%w: %w", ErrNoCapacity, invalid("size, numberOfReplicas: %d replicas of %d bytes need %d bytes on one disk; %s is %d "+
			"(disk %s of node %s: its size less reserved storage, times the %s setting of %d%%, less the replicas it holds)",
			spec.NumberOfReplicas, spec.Size, need, which, max(best.room, 0), best.disk, best.node, types.SettingNameStorageOverProvisioningPercentage, percent))
	}
	return nil
}

func (m *VolumeManager) overProvisioningPercentage() (int, error) {
	v, err := m.ds.GetSettingValue(types.SettingNameStorageOverProvisioningPercentage)
	if err != nil {
		return 0, err
	}
	percent, err := strconv.Atoi(v)
	if err != nil || percent < 0 {
		return 0, fmt.Errorf("setting %s: %q is not a percentage", types.SettingNameStorageOverProvisioningPercentage, v)
	}
	return percent, nil
}

func diskReady(st *longhorn.DiskStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == longhorn.ConditionTypeReady {
			return c.Status == longhorn.ConditionStatusTrue
		}
	}
	return false
}
