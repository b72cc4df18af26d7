// Package systembackup holds the SystemBackup and SystemRestore
// controllers (Longhorn v1.4's).
//
// A SystemBackup, once created, backs up the volumes its
// volumeBackupPolicy asks for (volumes.go), collects Longhorn's own
// objects (collect.go) and writes them, with the backup each volume is
// to be restored from, as an archive to the default backup target in
// Longhorn's layout (package systembackup). The default target's owner
// also makes a SystemBackup for every archive it finds there, so a
// cluster pointed at the target sees them. Deleting a SystemBackup
// deletes its archive.
//
// A SystemRestore reads the archive of the SystemBackup it names, checks
// all of it before it writes anything, and creates what the cluster
// lacks (restore.go): objects of the same name already there are left as
// they are; each volume is created restoring from its backup
// (spec.fromBackup), which the volume controller does.
package systembackup
