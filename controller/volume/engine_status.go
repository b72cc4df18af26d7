package volume

import (
	"cmp"
	"context"
	"fmt"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// mirrorEngine copies the running engine's replicas, snapshots and purge
// into the Engine status, from one call of the engine's control API. The
// snapshot list keeps the entries of a failed read out, with the error,
// rather than dropping them.
func (c *Controller) mirrorEngine(e instance.Engine, status *longhorn.EngineStatus) {
	st := e.Status()
	status.ReplicaModeMap = map[string]longhorn.ReplicaMode{}
	for name, mode := range st.ReplicaModes {
		status.ReplicaModeMap[name] = longhorn.ReplicaMode(mode)
	}
	mirrorSnapshots(st, status)
	status.BackupStatus = map[string]*longhorn.EngineBackupStatus{}
	for name, b := range st.Backups {
		status.BackupStatus[name] = &longhorn.EngineBackupStatus{SnapshotName: b.Snapshot, Progress: b.Progress, State: b.State, BackupURL: b.URL, Error: b.Error}
	}
	p := st.Purge
	status.PurgeStatus = map[string]*longhorn.PurgeStatus{c.engineAddress: {IsPurging: p.IsPurging, Progress: p.Progress, State: p.State, Error: p.Error}}
	// By replica name (Longhorn keys it by the replica's address).
	status.RebuildStatus = map[string]*longhorn.RebuildStatus{}
	for name, r := range st.Rebuilds {
		status.RebuildStatus[name] = &longhorn.RebuildStatus{IsRebuilding: r.IsRebuilding, Progress: r.Progress, State: r.State, Error: r.Error,
			FromReplicaAddress: cmp.Or(r.FromReplicaAddress, r.FromReplica)}
	}
}

// mirrorSnapshots sets the Engine's snapshot list from the engine's
// status; one the engine cannot read keeps the last list, with the error.
func mirrorSnapshots(st volumeengine.Status, status *longhorn.EngineStatus) {
	if st.SnapshotsError != nil {
		status.SnapshotsError = st.SnapshotsError.Error()
		return
	}
	status.SnapshotsError = ""
	status.Snapshots = map[string]*longhorn.SnapshotInfo{}
	for _, s := range st.Snapshots {
		status.Snapshots[s.Name] = kit.SnapshotInfo(s)
	}
}

// writeEngineStatus writes the Engine's status when it changed and returns the
// resource version that holds it.
func (c *Controller) writeEngineStatus(ctx context.Context, e *longhorn.Engine, status *longhorn.EngineStatus) (string, error) {
	if !kit.StatusChanged(status, &e.Status) {
		return e.ResourceVersion, nil
	}
	updated := e.DeepCopy()
	updated.Status = *status
	written, err := c.ds.UpdateEngineStatus(ctx, updated)
	if err != nil {
		return "", fmt.Errorf("update status of engine %s: %w", e.Name, err)
	}
	return written.ResourceVersion, nil
}

// changedBeyondList tells whether status differs from the Engine's
// current one in more than its snapshot list.
func changedBeyondList(status, current *longhorn.EngineStatus) bool {
	other := *status
	other.Snapshots, other.SnapshotsError = current.Snapshots, current.SnapshotsError
	return kit.StatusChanged(&other, current)
}
