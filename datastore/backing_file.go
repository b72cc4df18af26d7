package datastore

import (
	"fmt"
	"path/filepath"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// ReplicaBackingFile is the file of backing image bi that replica r opens
// on its own disk, or, while that file is not ready there, why not
// (waiting). Whichever node opens the replica (its engine's, or its own
// serving it to another node's engine) names the same path, the replica's
// disk being that node's.
func ReplicaBackingFile(bi *longhorn.BackingImage, r *longhorn.Replica) (file *replica.BackingFile, waiting string) {
	st := bi.Status.DiskFileStatusMap[r.Spec.DiskID]
	if st == nil || st.State != longhorn.BackingImageStateReady {
		state, msg := longhorn.BackingImageStatePending, ""
		if st != nil {
			state, msg = st.State, st.Message
		}
		w := fmt.Sprintf("replica %s: the file on disk %s is %s", r.Name, r.Spec.DiskID, state)
		if msg != "" {
			w += ": " + msg
		}
		return nil, w
	}
	return &replica.BackingFile{
		Path:     filepath.Join(backingimage.FileFolder(r.Spec.DiskPath, bi.Name, bi.Status.UUID), backingimage.DataFile),
		Name:     bi.Name,
		Checksum: bi.Status.Checksum,
	}, ""
}
