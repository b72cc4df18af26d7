// Package types holds the names every other package shares: label and
// annotation keys, the finalizer, and the manager's settings with their
// defaults and validation.
package types

import "strings"

const (
	// LonghornFinalizer guards every Longhorn object the manager cleans up after.
	LonghornFinalizer = "longhorn.io"

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
	// RecurringJobGroupDefault is the group of volumes that select nothing.
	RecurringJobGroupDefault = "default"
	// LabelValueEnabled is the value of job and group selection labels.
	LabelValueEnabled = "enabled"

	// LabelVolume names the volume a snapshot, engine or replica belongs to.
	LabelVolume = "longhornvolume"
	// LabelNode names the node an object belongs to.
	LabelNode = "longhornnode"

	// AnnotationAttachedBy on a Volume names who attached it when that was
	// not a user or a workload: a recurring job's run,
	// recurring-job/<job>/<tick>. Only that attacher may detach the volume
	// by its name; a plain attach removes the annotation (takes it over).
	AnnotationAttachedBy = "longhorn.io/attached-by"
)

// RecurringJobLabelKey is the volume label that selects the job.
func RecurringJobLabelKey(job string) string { return RecurringJobLabelPrefix + job }

// RecurringJobGroupLabelKey is the volume label that selects the group.
func RecurringJobGroupLabelKey(group string) string { return RecurringJobGroupLabelPrefix + group }

// IsRecurringJobSelectionLabel reports whether key selects a job or a group.
func IsRecurringJobSelectionLabel(key string) bool {
	return strings.HasPrefix(key, RecurringJobLabelPrefix) || strings.HasPrefix(key, RecurringJobGroupLabelPrefix)
}
