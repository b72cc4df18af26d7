package metrics

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

var (
	volumeStates = []longhorn.VolumeState{longhorn.VolumeStateCreating, longhorn.VolumeStateAttached, longhorn.VolumeStateDetached,
		longhorn.VolumeStateAttaching, longhorn.VolumeStateDetaching, longhorn.VolumeStateDeleting}
	volumeRobustnesses = []longhorn.VolumeRobustness{longhorn.VolumeRobustnessHealthy, longhorn.VolumeRobustnessDegraded,
		longhorn.VolumeRobustnessFaulted, longhorn.VolumeRobustnessUnknown}

	volumeState = newDesc("longhorn_volume_state",
		"1 for the volume's state (creating, attached, detached, attaching, detaching, deleting), 0 for the others.", "volume", "state")
	volumeRobustness = newDesc("longhorn_volume_robustness",
		"1 for the volume's robustness (healthy, degraded, faulted, unknown), 0 for the others.", "volume", "robustness")
	volumeSize    = newDesc("longhorn_volume_size_bytes", "The volume's size.", "volume")
	volumeCreated = newDesc("longhorn_volume_created_timestamp_seconds",
		"When the volume was created.", "volume")
	volumeLastBackup = newDesc("longhorn_volume_last_backup_timestamp_seconds",
		"When the volume's newest completed backup in the backup target completed (its recovery point there); 0 when it has none there. One series for the volume's own target and for each target a backup job or a backup of it names.", "volume", "backup_target")
	volumeLastSnapshot = newDesc("longhorn_volume_last_snapshot_timestamp_seconds",
		"When the volume's newest snapshot was taken (its local recovery point); 0 when it has none.", "volume")
	volumeSnapshots = newDesc("longhorn_volume_snapshots",
		"Snapshots of the volume, not counting those marked removed.", "volume")
	volumeSnapshotBytes = newDesc("longhorn_volume_snapshot_bytes",
		"Bytes the volume's snapshots hold, not counting those marked removed.", "volume")
	volumeJob = newDesc("longhorn_volume_recurring_job",
		"1 for each recurring job that selects the volume (by its label or a group's).", "volume", "recurring_job", "task")
	volumeBackupJobs = newDesc("longhorn_volume_backup_jobs",
		"Unsuspended backup jobs that select the volume; 0 means nothing backs it up.", "volume")
	volumeBackupInterval = newDesc("longhorn_volume_backup_interval_seconds",
		"The shortest interval of the unsuspended backup jobs that select the volume and back it up to the backup target; absent when none does.", "volume", "backup_target")
)

func isBackupTask(t longhorn.RecurringJobType) bool {
	return t == longhorn.RecurringJobTypeBackup || t == longhorn.RecurringJobTypeBackupForceCreate
}

// jobsByLabel indexes the jobs by the volume labels that select them: the
// job's own label and its groups', as a run selects its volumes. A scrape
// then looks up a volume's few labels instead of walking every job.
func jobsByLabel(jobs []*longhorn.RecurringJob) map[string][]*longhorn.RecurringJob {
	out := map[string][]*longhorn.RecurringJob{}
	for _, job := range jobs {
		if job.DeletionTimestamp != nil {
			continue
		}
		out[types.RecurringJobLabelKey(job.Name)] = append(out[types.RecurringJobLabelKey(job.Name)], job)
		for _, g := range job.Spec.Groups {
			out[types.RecurringJobGroupLabelKey(g)] = append(out[types.RecurringJobGroupLabelKey(g)], job)
		}
	}
	return out
}

// selecting lists the jobs that select a volume with these labels, each
// once, by name.
func selecting(index map[string][]*longhorn.RecurringJob, volumeLabels map[string]string) []*longhorn.RecurringJob {
	var out []*longhorn.RecurringJob
	seen := map[string]bool{}
	for key, value := range volumeLabels {
		if value != types.LabelValueEnabled {
			continue
		}
		for _, job := range index[key] {
			if !seen[job.Name] {
				seen[job.Name] = true
				out = append(out, job)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *Collector) collectVolumes(ch chan<- prometheus.Metric, jobs []*longhorn.RecurringJob, now time.Time) {
	volumes, err := c.ds.ListVolumesRO(labels.Everything())
	if err != nil {
		c.log.WithError(err).Warn("Cannot list volumes for the metrics")
		return
	}
	lastBackup := c.lastBackups()
	index := jobsByLabel(jobs)
	intervals := map[string]time.Duration{}
	for _, job := range jobs {
		if d, ok := cronInterval(job.Spec.Cron, job.Spec.TimeZone, now); ok {
			intervals[job.Name] = d
		}
	}
	for _, v := range volumes {
		// A drill's scratch volume is no user's: no backup job selects it,
		// and the alerts on volumes are not about it.
		if v.Status.OwnerID != c.nodeID || types.IsBackupVerifyScratch(v.Labels) {
			continue
		}
		name := v.Name
		for _, s := range volumeStates {
			gauge(ch, volumeState, boolValue(v.Status.State == s), name, string(s))
		}
		for _, r := range volumeRobustnesses {
			gauge(ch, volumeRobustness, boolValue(v.Status.Robustness == r), name, string(r))
		}
		gauge(ch, volumeSize, float64(v.Spec.Size), name)
		gauge(ch, volumeCreated, unixSeconds(v.CreationTimestamp.Time), name)
		c.collectSnapshots(ch, name)
		collectBackupProtection(ch, v, selecting(index, v.Labels), intervals, lastBackup[name])
	}
}

// collectBackupProtection serves how the volume is backed up, per backup
// target: the jobs that select it, the shortest interval of the backup
// jobs per target they back it up to (datastore.JobBackupTarget), and
// its recovery point in each target (last: its newest completed backup
// per target), 0 for its own target and a job's target that hold none.
func collectBackupProtection(ch chan<- prometheus.Metric, v *longhorn.Volume, jobs []*longhorn.RecurringJob, intervals map[string]time.Duration, last map[string]time.Time) {
	name := v.Name
	backupJobs := 0
	intervalIn := map[string]time.Duration{}
	for _, job := range jobs {
		gauge(ch, volumeJob, 1, name, job.Name, string(job.Spec.Task))
		d, ok := intervals[job.Name]
		if !isBackupTask(job.Spec.Task) || job.Spec.Suspend || !ok {
			continue
		}
		backupJobs++
		target := datastore.JobBackupTarget(job, v)
		if cur, seen := intervalIn[target]; !seen || d < cur {
			intervalIn[target] = d
		}
	}
	gauge(ch, volumeBackupJobs, float64(backupJobs), name)
	recoveryPoints := map[string]time.Time{datastore.TargetName(v.Spec.BackupTargetName): {}}
	for target, d := range intervalIn {
		gauge(ch, volumeBackupInterval, d.Seconds(), name, target)
		recoveryPoints[target] = time.Time{}
	}
	for target, at := range last {
		recoveryPoints[target] = at
	}
	for target, at := range recoveryPoints {
		gauge(ch, volumeLastBackup, unixSeconds(at), name, target)
	}
}

func (c *Collector) collectSnapshots(ch chan<- prometheus.Metric, volume string) {
	snaps, err := c.ds.ListVolumeSnapshotsRO(volume)
	if err != nil {
		c.log.WithError(err).WithField("volume", volume).Warn("Cannot list the volume's snapshots for the metrics")
		return
	}
	var newest time.Time
	var count, bytes int64
	for _, s := range snaps {
		if s.Status.MarkRemoved || s.DeletionTimestamp != nil {
			continue
		}
		count++
		bytes += s.Status.Size
		if t := parseTime(s.Status.CreationTime); t.After(newest) {
			newest = t
		}
	}
	gauge(ch, volumeSnapshots, float64(count), volume)
	gauge(ch, volumeSnapshotBytes, float64(bytes), volume)
	gauge(ch, volumeLastSnapshot, unixSeconds(newest), volume)
}

// lastBackups is when each volume's newest completed backup in each
// target completed: by volume, then by target.
func (c *Collector) lastBackups() map[string]map[string]time.Time {
	out := map[string]map[string]time.Time{}
	backups, err := c.ds.ListBackupsRO("")
	if err != nil {
		c.log.WithError(err).Warn("Cannot list backups for the metrics")
		return out
	}
	for _, b := range backups {
		if b.Status.State != longhorn.BackupStateCompleted {
			continue
		}
		vol, target := datastore.BackupVolumeName(b), datastore.BackupTargetOf(b)
		if out[vol] == nil {
			out[vol] = map[string]time.Time{}
		}
		if t := parseTime(b.Status.BackupCreatedAt); t.After(out[vol][target]) {
			out[vol][target] = t
		}
	}
	return out
}
