// Package backupverify holds the backup verify controller: it makes the
// drills that Backup objects ask for (spec.verifyRequestedAt, set by the
// backup volume's backupVerify action, which a backup-verify recurring
// job calls for each of its volumes' newest Completed backup). A drill
// reads every block of the backup back from the target and checks it
// (backupstore.Verifier); the controller records what it found in the
// Backup's status.verification and the volume's
// status.lastBackupVerification, and says so in an event on the volume.
// A damaged backup makes the volume's next backup to its target full
// (datastore.NextBackupFull).
//
// A full drill (spec.verifyFull), once the blocks passed, restores the
// backup into a scratch volume of its own (scratch.go: labelled, owned by
// the Backup, on the drilling node), checks the filesystem it holds
// read-only (full.go: internal/rodevice, internal/fscheck) and deletes
// it, whatever happened; a scratch volume no drill runs on, one a crash
// left, is deleted when the Volume informer brings it (at start, too).
//
// A target's owner makes the drills of its backups: the node the
// backup target controller gave the BackupTarget (kit.Ownership,
// status.ownerID), the one that polls it. When that node's manager goes
// down another claims the target and takes the drills asked for, as it
// takes the polling. A node makes one drill at a time, each reading
// backup-concurrent-limit blocks at once, and never writes to the target
// but its lock.
package backupverify
