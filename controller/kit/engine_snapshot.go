package kit

import (
	"strconv"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// SnapshotInfo is an engine snapshot as Longhorn's Engine status lists
// it: the entry the Engine object's mirror writes and a Snapshot object's
// status is made from.
func SnapshotInfo(s replica.Snapshot) *longhorn.SnapshotInfo {
	children := make(map[string]bool, len(s.Children))
	for _, child := range s.Children {
		children[child] = true
	}
	return &longhorn.SnapshotInfo{Name: s.Name, Parent: s.Parent, Children: children, Removed: s.Removed,
		UserCreated: s.UserCreated, Created: s.Created, Size: strconv.FormatInt(s.Size, 10), Labels: s.Labels}
}
