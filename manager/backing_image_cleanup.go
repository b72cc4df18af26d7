package manager

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// backingImageCleanup is what a cleanup of some of a backing image's
// disks is decided from.
type backingImageCleanup struct {
	// Disks is the image's spec.disks.
	Disks map[string]string
	// MinCopies is spec.minNumberOfCopies (1 when unset).
	MinCopies int
	// Files is status.diskFileStatusMap.
	Files map[string]*longhorn.BackingImageDiskFileStatus
	// InUse names, per disk UUID, the replicas whose chain opens the file.
	InUse map[string][]string
	// PreparingDisk is the disk where the data source still prepares the
	// first file (empty once a manager took it).
	PreparingDisk string
	// Requested are the disks to clean now.
	Requested []string
}

// cleanupRefusal says why a cleanup cannot be done; unknown is a disk the
// image never named (the caller's mistake, 400), the rest are conflicts
// with what the image and its replicas are doing (409).
type cleanupRefusal struct {
	unknown bool
	message string
}

func (r *cleanupRefusal) Error() string { return r.message }

// decideBackingImageCleanup returns the disks that stay in spec.disks
// after removing the requested ones, or why that is refused: a disk the
// image does not name, a disk whose file a replica uses, the disk where
// the first file is still being prepared, removing every disk, or leaving
// fewer ready copies than minNumberOfCopies when a ready copy is removed.
func decideBackingImageCleanup(c backingImageCleanup) (map[string]string, *cleanupRefusal) {
	if len(c.Requested) == 0 {
		return nil, &cleanupRefusal{unknown: true, message: "disks: name at least one disk UUID to clean up"}
	}
	remove := map[string]bool{}
	for i, disk := range c.Requested {
		if disk == "" {
			return nil, &cleanupRefusal{unknown: true, message: fmt.Sprintf("disks[%d]: empty disk UUID", i)}
		}
		if _, ok := c.Disks[disk]; !ok {
			return nil, &cleanupRefusal{unknown: true, message: fmt.Sprintf("disks[%d]: disk %s holds no file of this backing image (its disks are %s)", i, disk, strings.Join(slices.Sorted(maps.Keys(c.Disks)), ", "))}
		}
		remove[disk] = true
	}
	for _, disk := range slices.Sorted(maps.Keys(remove)) {
		if users := c.InUse[disk]; len(users) > 0 {
			users = slices.Clone(users)
			sort.Strings(users)
			return nil, &cleanupRefusal{message: fmt.Sprintf("disk %s: its file is used by replica %s", disk, strings.Join(users, ", "))}
		}
		if disk == c.PreparingDisk {
			return nil, &cleanupRefusal{message: fmt.Sprintf("disk %s: the first file of the image is still being prepared there", disk)}
		}
	}
	if len(remove) == len(c.Disks) {
		return nil, &cleanupRefusal{message: "disks: cleaning up every disk of the image would leave it no file; delete the backing image instead"}
	}
	minCopies := max(c.MinCopies, 1)
	ready, removedReady := 0, 0
	for disk := range c.Disks {
		if f := c.Files[disk]; f != nil && f.State == longhorn.BackingImageStateReady {
			if remove[disk] {
				removedReady++
			} else {
				ready++
			}
		}
	}
	if removedReady > 0 && ready < minCopies {
		return nil, &cleanupRefusal{message: fmt.Sprintf("disks: the cleanup would leave %d ready copies, fewer than minNumberOfCopies %d", ready, minCopies)}
	}
	keep := make(map[string]string, len(c.Disks)-len(remove))
	for disk, v := range c.Disks {
		if !remove[disk] {
			keep[disk] = v
		}
	}
	return keep, nil
}
