// Package types holds the names every other package shares: label and
// annotation keys, the finalizer, and the manager's settings with their
// defaults and validation.
package types

import "strings"

const (
	// LonghornFinalizer guards every Longhorn object the manager cleans up after.
	LonghornFinalizer = "longhorn.io"

	// AnnotationSelectedNode, on a Volume, is the node whose disks take
	// its replicas when it is made (the node the scheduler chose for a
	// WaitForFirstConsumer claim, which the CSI driver passes); any node
	// when absent. Like Kubernetes' volume.kubernetes.io/selected-node on
	// a claim.
	AnnotationSelectedNode = "longhorn.io/selected-node"
	// AnnotationRebuildTarget, on a Replica, says it was made in place
	// of a lost one of a volume that holds data: it is rebuilt into the
	// running engine, and no engine start opens it before it was.
	AnnotationRebuildTarget = "longhorn.io/rebuild-target"

	// LabelManagedBy marks objects the manager creates for itself.
	LabelManagedBy = "longhorn.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "longhorn-manager"

	// RecurringJobLabel is the label key of a job's CronJob, and the
	// label given to every snapshot and backup a job creates.
	RecurringJobLabel = "recurring-job.longhorn.io"
	// LabelRecurringJob is the label on snapshots and backups made by a job.
	LabelRecurringJob = "RecurringJob"
	// RecurringJobLabelPrefix selects a job for a volume:
	// recurring-job.longhorn.io/<job>: enabled.
	RecurringJobLabelPrefix = "recurring-job.longhorn.io/"
	// RecurringJobGroupLabelPrefix selects a group of jobs for a volume:
	// recurring-job-group.longhorn.io/<group>: enabled.
	RecurringJobGroupLabelPrefix = "recurring-job-group.longhorn.io/"
	// RecurringJobSourceLabel, "enabled" on a PersistentVolumeClaim, makes
	// the claim's job and group labels its volume's (Longhorn v1.5). It
	// selects no job, on a claim or a volume.
	RecurringJobSourceLabel = RecurringJobLabelPrefix + "source"
	// RecurringJobGroupDefault is the group of volumes that select nothing.
	RecurringJobGroupDefault = "default"
	// LabelValueEnabled is the value of job and group selection labels.
	LabelValueEnabled = "enabled"

	// LabelSystemBackup, on the snapshots and backups a system backup
	// makes, names it.
	LabelSystemBackup = "longhorn.io/system-backup"
	// LabelVolumeUID, on the backups the manager makes, is the UID of
	// the Volume object backed up. A system backup counts a volume's
	// backup in the target as its own only with this UID: another
	// cluster's volume of the same name, or one deleted and made again
	// under it, has another.
	LabelVolumeUID = "longhorn.io/volume-uid"
	// LabelVersion, on a SystemBackup made for an archive found in the
	// backup target, is the Longhorn version folder it was found in, as
	// Longhorn's.
	LabelVersion = "longhorn.io/version"

	// LabelVolume names the volume a snapshot, engine or replica belongs to.
	LabelVolume = "longhornvolume"
	// LabelNode names the node an object belongs to.
	LabelNode = "longhornnode"

	// AnnotationAttachedBy on a Volume names who attached it when that was
	// not a user or a workload: a recurring job's run,
	// recurring-job/<job>/<tick>. Only that attacher may detach the volume
	// by its name; a plain attach removes the annotation (takes it over).
	AnnotationAttachedBy = "longhorn.io/attached-by"

	// LabelRecurringJobTick records on snapshots and backups the schedule
	// tick that made them, so a second run for the same tick makes nothing
	// twice.
	LabelRecurringJobTick = "RecurringJobTick"
	// AnnotationRecurringJobSpec records, on a CronJob, the RecurringJob
	// spec it was made from, so `kubectl describe` shows what it runs.
	AnnotationRecurringJobSpec = "recurring-job.longhorn.io/spec"

	// LabelBackupVolume names the backup volume a Backup belongs to.
	LabelBackupVolume = "backup-volume"
	// LabelBackupTarget names the BackupTarget a Backup or BackupVolume
	// is in. Longhorn's name (v1.8).
	LabelBackupTarget = "backup-target"
	// LabelDeleteCustomResourceOnly, "true" on a Backup or BackupVolume,
	// says its deletion is the manager forgetting an object whose data is
	// no longer in the backup target (or was never there): the finalizer
	// deletes nothing from the target. Longhorn's name.
	LabelDeleteCustomResourceOnly = "longhorn.io/delete-custom-resource-only"

	// LabelExportingBackingImage marks the snapshot an export-from-volume
	// backing image reads; its value is the image's name.
	LabelExportingBackingImage = "longhorn.io/for-exporting-backing-image"

	// LabelComponent says what a backing image server pod is:
	// backing-image-data-source or backing-image-manager.
	LabelComponent = "longhorn.io/component"
	// LabelBackingImage names the image a data source pod serves.
	LabelBackingImage = "longhorn.io/backing-image"
	// LabelDiskUUID is the disk a backing image server pod works on.
	LabelDiskUUID = "longhorn.io/disk-uuid"
	// LabelServerPodNode is the node a backing image server pod runs on.
	// It is not LabelNode (longhornnode, on heartbeat Leases): pods made
	// by earlier versions carry this key, and the runner finds them by it.
	LabelServerPodNode = "longhorn.io/node"
	// AnnotationServerSpec is a hash of a server pod's image and
	// arguments: a pod found with another is replaced, one with the same
	// is adopted.
	AnnotationServerSpec = "longhorn.io/backing-image-server-spec"
)

// RecurringJobLabelKey is the volume label that selects the job.
func RecurringJobLabelKey(job string) string { return RecurringJobLabelPrefix + job }

// RecurringJobGroupLabelKey is the volume label that selects the group.
func RecurringJobGroupLabelKey(group string) string { return RecurringJobGroupLabelPrefix + group }

// IsRecurringJobSelectionLabel reports whether key selects a job or a
// group; the source label selects neither.
func IsRecurringJobSelectionLabel(key string) bool {
	if key == RecurringJobSourceLabel {
		return false
	}
	return strings.HasPrefix(key, RecurringJobLabelPrefix) || strings.HasPrefix(key, RecurringJobGroupLabelPrefix)
}

// RecurringJobParameterFullBackupInterval is the RecurringJob parameter
// that makes every Nth run of a backup job take full backups (Longhorn's
// name).
const RecurringJobParameterFullBackupInterval = "full-backup-interval"

// RecurringJobParameterFullDrill, "true" on a backup-verify job, makes
// its drills full: each backup is also restored into a scratch volume and
// its filesystem checked.
const RecurringJobParameterFullDrill = "full-drill"

// RecurringJobParameterVolumeBackupPolicy, on a system-backup job, is
// the volumeBackupPolicy of the SystemBackups it makes: if-not-present
// (the default), always or disabled (Longhorn v1.9).
const RecurringJobParameterVolumeBackupPolicy = "volume-backup-policy"

// LabelBackupVerifyScratch marks a scratch volume a full drill restores a
// backup into; its value is the backup. Only the backup verify controller
// makes such volumes, and it deletes every one no drill of its uses. A
// scratch volume selects no recurring job, and the API does not list it.
const LabelBackupVerifyScratch = "longhorn.io/backup-verify-scratch"

// LabelBackupVerifyNode names the node whose drill made a scratch volume.
const LabelBackupVerifyNode = "longhorn.io/backup-verify-node"

// IsBackupVerifyScratch reports whether labels mark a drill's scratch
// volume.
func IsBackupVerifyScratch(labels map[string]string) bool {
	return labels[LabelBackupVerifyScratch] != ""
}
