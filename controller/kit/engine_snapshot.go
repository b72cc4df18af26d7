package kit

import (
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engineapi"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// SnapshotInfo is an engine snapshot as Longhorn's Engine status lists
// it: the entry the Engine object's mirror writes and a Snapshot object's
// status is made from (engineapi.NewSnapshotInfo, as the gRPC client makes
// it).
func SnapshotInfo(s replica.Snapshot) *longhorn.SnapshotInfo {
	return engineapi.NewSnapshotInfo(s.Name, s.Parent, s.Children, s.Removed, s.UserCreated, s.Created, s.Size, s.Labels)
}
