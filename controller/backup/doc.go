// Package backup holds the backup target controller: it polls the backup
// target named by the backup-target setting, mirrors its volumes and
// backups as BackupVolume and Backup objects, and deletes from the target
// what a user deletes, and nothing else: an object whose backup the
// target stops listing is removed without touching the target
// (deletion.go). Backups are keyed by volume and name. One node (the
// first Ready one by name) polls.
package backup
