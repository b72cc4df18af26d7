package backingimage

import (
	"sort"
	"time"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// diskLastRefAt is the image's status.diskLastRefAtMap for now: a disk of
// spec.disks on which no replica uses the file keeps the time it was first
// seen unused (stamped now when it has none, or one that does not parse);
// a disk a replica uses, or one no longer in spec.disks, has no entry.
func diskLastRefAt(disks map[string]string, old map[string]string, used map[string]bool, now time.Time) map[string]string {
	out := map[string]string{}
	for disk := range disks {
		if used[disk] {
			continue
		}
		if at, ok := old[disk]; ok {
			if _, err := time.Parse(time.RFC3339, at); err == nil {
				out[disk] = at
				continue
			}
		}
		out[disk] = now.UTC().Format(time.RFC3339)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// diskCleanupView is what the cleanup of an image's unused files is
// decided from.
type diskCleanupView struct {
	// disks is spec.disks; files the per-disk file states.
	disks map[string]string
	files map[string]*longhorn.BackingImageDiskFileStatus
	// lastRefAt is status.diskLastRefAtMap; used the disks on which a
	// replica uses the file.
	lastRefAt map[string]string
	used      map[string]bool
	// minCopies is spec.minNumberOfCopies (1 when below).
	minCopies int
	// wait is the backing-image-cleanup-wait-interval.
	wait time.Duration
	now  time.Time
}

// disksToClean answers the disks to take out of spec.disks now, sorted,
// and when the next disk not yet due will be due (zero when none). A disk
// is due once its file has been unused for the wait interval. It never
// answers a disk a replica uses, never lowers the ready copies below
// minCopies, and cleans nothing while no copy is ready (the image is
// being prepared or recovered, and its disks are where that happens).
func disksToClean(v diskCleanupView) (remove []string, next time.Time) {
	minCopies := max(v.minCopies, 1)
	ready := 0
	for disk := range v.disks {
		if f := v.files[disk]; f != nil && f.State == longhorn.BackingImageStateReady {
			ready++
		}
	}
	type candidate struct {
		disk  string
		at    time.Time
		ready bool
	}
	var due []candidate
	for disk := range v.disks {
		if v.used[disk] {
			continue
		}
		at, err := time.Parse(time.RFC3339, v.lastRefAt[disk])
		if err != nil {
			continue
		}
		if at.Add(v.wait).After(v.now) {
			if when := at.Add(v.wait); next.IsZero() || when.Before(next) {
				next = when
			}
			continue
		}
		f := v.files[disk]
		due = append(due, candidate{disk: disk, at: at, ready: f != nil && f.State == longhorn.BackingImageStateReady})
	}
	if ready == 0 {
		return nil, next
	}
	// Copies that are not ready go first: they cost no ready copy. Then
	// the longest unused.
	sort.Slice(due, func(i, j int) bool {
		if due[i].ready != due[j].ready {
			return !due[i].ready
		}
		if !due[i].at.Equal(due[j].at) {
			return due[i].at.Before(due[j].at)
		}
		return due[i].disk < due[j].disk
	})
	for _, c := range due {
		if c.ready {
			if ready-1 < minCopies {
				continue
			}
			ready--
		}
		remove = append(remove, c.disk)
	}
	sort.Strings(remove)
	return remove, next
}
