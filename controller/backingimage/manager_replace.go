package backingimage

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Replacing the backing image manager of a disk that runs from an old
// image, without a new download and without a replica losing its file:
//
//  1. The BackingImage controller creates the disk's manager of the
//     default image (named after the image and the disk, so both coexist)
//     with every file the old one keeps in its spec; it waits while the
//     old one is transferring a file, since the new server removes
//     half-written folders when it starts.
//  2. The new server finds the files on the disk (listed unknown) and its
//     controller verifies them by Fetch with no source: hashed, checked,
//     ready ("reused the file on the disk").
//  3. Meanwhile the old manager changes nothing on the disk: no fetch,
//     sync, check or delete; its files stay where the replicas read them,
//     and the image's status shows the old manager's ready file until the
//     new one's is ready.
//  4. Once the new manager has every file of the old one ready, the old
//     object is deleted and its server stopped; the files stay.

// newManager is a manager of image for a disk, keeping every file the
// outdated managers of the disk keep.
func newManager(image, nodeID, diskUUID, diskPath string, outdated []*longhorn.BackingImageManager) *longhorn.BackingImageManager {
	bim := &longhorn.BackingImageManager{
		ObjectMeta: metav1.ObjectMeta{Name: managerName(image, diskUUID)},
		Spec: longhorn.BackingImageManagerSpec{Image: image, NodeID: nodeID, DiskUUID: diskUUID, DiskPath: diskPath,
			BackingImages: map[string]string{}},
	}
	for _, old := range outdated {
		for name, uuid := range old.Spec.BackingImages {
			bim.Spec.BackingImages[name] = uuid
		}
	}
	return bim
}

// transferringManager answers one of the managers that is getting a file
// now (starting or in progress), or nil.
func transferringManager(bims []*longhorn.BackingImageManager) *longhorn.BackingImageManager {
	for _, bim := range bims {
		for _, f := range bim.Status.BackingImageFileMap {
			if f.State == longhorn.BackingImageStateStarting || f.State == longhorn.BackingImageStateInProgress {
				return bim
			}
		}
	}
	return nil
}

// shownManager is the manager whose file of bi the status shows for a
// disk: the current one, unless its file is not ready yet and an outdated
// one still has it ready.
func shownManager(bi *longhorn.BackingImage, current *longhorn.BackingImageManager, outdated []*longhorn.BackingImageManager) *longhorn.BackingImageManager {
	if fileReady(current, bi.Name, bi.Status.UUID) {
		return current
	}
	for _, old := range outdated {
		if fileReady(old, bi.Name, bi.Status.UUID) && old.Status.CurrentState == longhorn.BackingImageManagerStateRunning {
			return old
		}
	}
	return current
}

func fileReady(bim *longhorn.BackingImageManager, name, uuid string) bool {
	if bim == nil {
		return false
	}
	f, ok := bim.Status.BackingImageFileMap[name]
	return ok && f.UUID == uuid && f.State == longhorn.BackingImageStateReady
}

// replacementOf answers the manager of the default image on the same disk
// as bim, when bim runs from another image; nil when there is none (then
// bim goes on as the disk's manager).
func replacementOf(bim *longhorn.BackingImageManager, defaultImage string, all []*longhorn.BackingImageManager) *longhorn.BackingImageManager {
	if bim.Spec.Image == defaultImage {
		return nil
	}
	for _, other := range all {
		if other.Name != bim.Name && other.Spec.DiskUUID == bim.Spec.DiskUUID && other.Spec.Image == defaultImage && other.DeletionTimestamp == nil {
			return other
		}
	}
	return nil
}

// filesNotTakenOver answers the files old keeps that its replacement does
// not yet have ready, sorted; none means old can go.
func filesNotTakenOver(old, replacement *longhorn.BackingImageManager) []string {
	var missing []string
	for name, uuid := range old.Spec.BackingImages {
		if replacement.Spec.BackingImages[name] != uuid || !fileReady(replacement, name, uuid) ||
			replacement.Status.CurrentState != longhorn.BackingImageManagerStateRunning {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	return missing
}

// wantedBySibling reports whether another manager of the same disk keeps
// the file name of uuid: a manager never deletes a file its sibling (an
// outdated manager being replaced, or the replacement) still wants.
func wantedBySibling(bim *longhorn.BackingImageManager, all []*longhorn.BackingImageManager, name, uuid string) bool {
	for _, other := range all {
		if other.Name != bim.Name && other.Spec.DiskUUID == bim.Spec.DiskUUID && other.Spec.BackingImages[name] == uuid {
			return true
		}
	}
	return false
}
