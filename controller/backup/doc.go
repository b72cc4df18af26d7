// Package backup holds the backup target controller: it polls the backup
// target named by the backup-target setting once per
// backupstore-poll-interval (poll.go), refreshes one volume after a
// backup of it finished or a deletion (backup_volume.go), mirrors the
// target's volumes and backups as BackupVolume and Backup objects
// (volume_sync.go), and deletes from the target what a user deletes, and
// nothing else: an object whose backup the target stops listing is
// removed without touching the target (deletion.go). Which events read
// the target is events.go. Backups are keyed by volume and name. One node
// (the first Ready one by name) polls.
package backup
