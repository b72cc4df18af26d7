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
	// Rebuilds is each replica's last rebuild (RebuildStatus).
	Rebuilds map[string]RebuildStatus
}

// statusAt is a Status and the generation it was read at.
type statusAt struct {
	generation uint64
	status     Status
}

// Status reports, in one call of the control API, what ReplicaModes,
// Snapshots, PurgeStatus and BackupStatuses report one by one. The engine
// is read at most once per generation: until the next change, every
// caller (the Engine object's mirror, the Snapshot objects' syncs) gets
// that one read, which none may modify.
func (e *Engine) Status() Status {
	// The generation is read first: a change while reading moves it, and
	// the next call reads again.
	gen := e.generation.Load()
	e.statusMu.Lock()
	defer e.statusMu.Unlock()
	if e.status != nil && e.status.generation == gen {
		return e.status.status
	}
	e.called("Status")
	var s Status
	s.ReplicaModes = e.replicaModes()
	s.Snapshots, s.SnapshotsError = e.snapshots()
	s.Purge = e.purgeStatus()
	s.Backups = e.backupStatuses()
	s.Rebuilds = e.RebuildStatus()
	e.status = &statusAt{generation: gen, status: s}
	return s
}
