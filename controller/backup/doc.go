// Package backup holds the backup target controller: it polls the backup
// target named by the backup-target setting, mirrors its volumes and
// backups as BackupVolume and Backup objects, and deletes from the target
// what a user deletes. One node (the first Ready one by name) polls.
package backup
