package manager

import (
	"errors"
	"fmt"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// checkCapacity refuses a volume that no ready disk can hold. A volume's
// replicas all live on one disk of the node it attaches to, so the bound
// is the largest room any ready disk has for replicas
// (datastore.DiskRoom). While no disk has reported its size (a node
// starting), nothing is refused here.
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

func (m *VolumeManager) checkRoom(spec longhorn.VolumeSpec, diskUUID, volume string) error {
	room, err := m.ds.RoomiestDisk(diskUUID, volume)
	if err != nil {
		return err
	}
	if room.Holds(spec.Size, spec.NumberOfReplicas) {
		return nil // an unknown disk, or a size refused elsewhere naming the field
	}
	which := "the most any ready disk has room for is"
	if diskUUID != "" {
		which = "the disk that holds the volume's replicas has room for"
	}
	return fmt.Errorf("%w: %w", ErrNoCapacity, invalid("size, numberOfReplicas: %d replicas of %d bytes need %d bytes on one disk; %s %d (%s)",
		spec.NumberOfReplicas, spec.Size, spec.Size*int64(spec.NumberOfReplicas), which, max(room.Room, 0), room.Describe()))
}
