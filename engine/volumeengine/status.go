package volumeengine

import "github.com/cadence-storage/longhorn-manager/engine/replica"

// Status is everything the control API reports about the engine that a
// status mirror (the Engine object's status) copies: replica modes,
// snapshots, the last purge and the backups.
type Status struct {
	ReplicaModes map[string]Mode
	// Snapshots lists the snapshots and the head; SnapshotsError is set
	// instead when they cannot be read (no healthy replica).
	Snapshots      []replica.Snapshot
	SnapshotsError error
	Purge          PurgeStatus
	Backups        map[string]BackupStatus
}

// Status reports, in one call of the control API, what ReplicaModes,
// Snapshots, PurgeStatus and BackupStatuses report one by one.
func (e *Engine) Status() Status {
	e.called("Status")
	var s Status
	s.ReplicaModes = e.replicaModes()
	s.Snapshots, s.SnapshotsError = e.snapshots()
	s.Purge = e.purgeStatus()
	s.Backups = e.backupStatuses()
	return s
}
