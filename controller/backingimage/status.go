package backingimage

import (
	"fmt"
	"sort"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// backingImageView is what a BackingImage's status is computed from: the
// image, its data source (nil when none) and the managers of its disks by
// disk UUID.
type backingImageView struct {
	image      *longhorn.BackingImage
	dataSource *longhorn.BackingImageDataSource
	managers   map[string]*longhorn.BackingImageManager
}

// expectedChecksum is the SHA512 every copy must have: the one the user
// gave, else the one the data source computed for the first file.
func (v backingImageView) expectedChecksum() string {
	if v.image.Spec.Checksum != "" {
		return v.image.Spec.Checksum
	}
	if v.dataSource != nil && v.dataSource.Spec.UUID == v.image.Status.UUID && v.dataSource.Status.Checksum != "" {
		return v.dataSource.Status.Checksum
	}
	return v.image.Status.Checksum
}

// diskFile is the state of the image's file on one disk, as its manager
// reports it, or as the data source reports it while the first file is
// being prepared on that disk.
func (v backingImageView) diskFile(disk, expected string) longhorn.BackingImageDiskFileStatus {
	bi := v.image
	bim := v.managers[disk]
	ds := v.dataSource
	firstFileHere := ds != nil && ds.Spec.UUID == bi.Status.UUID && !ds.Spec.FileTransferred && ds.Spec.DiskUUID == disk
	// While the data source prepares the first file on this disk, the
	// manager can hold no copy but a ready one: what else it says (a
	// file waiting for the data source) would hide the data source's
	// progress or failure.
	preparing := firstFileHere && ds.Status.CurrentState != longhorn.BackingImageStateReadyForTransfer
	var managerFile *longhorn.BackingImageDiskFileStatus
	if bim != nil {
		if f, ok := bim.Status.BackingImageFileMap[bi.Name]; ok && f.UUID == bi.Status.UUID {
			st := longhorn.BackingImageDiskFileStatus{State: f.State, Progress: f.Progress, Message: f.Message}
			if f.CurrentChecksum != "" && expected != "" && f.CurrentChecksum != expected &&
				(f.State == longhorn.BackingImageStateReady || f.State == longhorn.BackingImageStateReadyForTransfer) {
				// A file that hashes differently is never ready, whatever
				// its manager says.
				st.State = longhorn.BackingImageStateFailed
				st.Message = fmt.Sprintf("checksum mismatch: the file hashes to %s, want %s", f.CurrentChecksum, expected)
			}
			if st.State == longhorn.BackingImageStateReady || (st.State != longhorn.BackingImageStateFailed && !preparing) {
				return st
			}
			managerFile = &st
		}
	}
	if firstFileHere {
		// A failed file being fetched again shows the new data source.
		state := ds.Status.CurrentState
		if state == "" {
			state = longhorn.BackingImageStatePending
		}
		return longhorn.BackingImageDiskFileStatus{State: state, Progress: ds.Status.Progress, Message: ds.Status.Message}
	}
	if managerFile != nil {
		return *managerFile
	}
	switch {
	case bim == nil || bim.Status.CurrentState == "" || bim.Status.CurrentState == longhorn.BackingImageManagerStateStarting:
		return longhorn.BackingImageDiskFileStatus{State: longhorn.BackingImageStatePending, Message: "waiting for the backing image manager of the disk"}
	case bim.Status.CurrentState != longhorn.BackingImageManagerStateRunning:
		return longhorn.BackingImageDiskFileStatus{State: longhorn.BackingImageStateUnknown,
			Message: fmt.Sprintf("the backing image manager %s of the disk is %s", bim.Name, bim.Status.CurrentState)}
	}
	return longhorn.BackingImageDiskFileStatus{State: longhorn.BackingImageStatePending, Message: "waiting for a ready copy to take the file from"}
}

// backingImageStatus computes the image's status from the view: one file
// status per disk in spec.disks (keeping the transition time of a state
// that did not change), the size and the current checksum.
func backingImageStatus(v backingImageView, now string) longhorn.BackingImageStatus {
	bi := v.image
	status := *bi.Status.DeepCopy()
	expected := v.expectedChecksum()
	files := make(map[string]*longhorn.BackingImageDiskFileStatus, len(bi.Spec.Disks))
	disks := make([]string, 0, len(bi.Spec.Disks))
	for disk := range bi.Spec.Disks {
		disks = append(disks, disk)
	}
	sort.Strings(disks)
	for _, disk := range disks {
		st := v.diskFile(disk, expected)
		st.LastStateTransitionTime = now
		if old := bi.Status.DiskFileStatusMap[disk]; old != nil && old.State == st.State {
			st.LastStateTransitionTime = old.LastStateTransitionTime
		}
		files[disk] = &st
		if bim := v.managers[disk]; bim != nil && st.State == longhorn.BackingImageStateReady {
			if f, ok := bim.Status.BackingImageFileMap[bi.Name]; ok {
				status.Size, status.Checksum = f.Size, f.CurrentChecksum
				if f.VirtualSize > 0 {
					status.VirtualSize = f.VirtualSize
				}
			}
		}
	}
	if ds := v.dataSource; ds != nil && ds.Spec.UUID == bi.Status.UUID && ds.Status.CurrentState == longhorn.BackingImageStateReadyForTransfer && status.Checksum == "" {
		status.Size, status.Checksum = ds.Status.Size, ds.Status.Checksum
	}
	status.DiskFileStatusMap = files
	return status
}

// anyDiskReady reports whether some disk's file is ready.
func anyDiskReady(files map[string]*longhorn.BackingImageDiskFileStatus) bool {
	for _, f := range files {
		if f != nil && f.State == longhorn.BackingImageStateReady {
			return true
		}
	}
	return false
}
