package jobrun

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// runVolume runs the job's task on one volume. It returns a reason when
// the volume was skipped.
func (r *Executor) runVolume(ctx context.Context, job *longhorn.RecurringJob, v *longhorn.Volume, allowDetached bool) (string, error) {
	vol, err := r.API.Volume(ctx, v.Name)
	if client.IsNotFound(err) {
		return "the volume was deleted", nil
	}
	if err != nil {
		return "", err
	}
	if job.Spec.Task == longhorn.RecurringJobTypeBackupVerify {
		// A drill reads the target alone: no attach, and a faulted
		// volume's backups are the ones it matters most to know.
		full, _ := datastore.ParseFullDrill(job.Spec.Parameters[types.RecurringJobParameterFullDrill])
		return r.backupVerify(ctx, job, v.Name, full)
	}
	if job.Spec.Task == longhorn.RecurringJobTypeFilesystemTrim {
		return r.filesystemTrim(ctx, vol)
	}
	if vol.Robustness == string(longhorn.VolumeRobustnessFaulted) {
		return "the volume is faulted", nil
	}
	own, skipReason, err := r.attachForRun(ctx, job.Name, vol, allowDetached)
	if own {
		// The run attached the volume: it detaches it in its own name, so
		// a volume someone took over meanwhile stays attached.
		defer r.releaseAfterRun(context.WithoutCancel(ctx), job.Name, v.Name)
	}
	if err != nil || skipReason != "" {
		return skipReason, err
	}
	if r.AfterAttach != nil {
		r.AfterAttach(ctx, job.Name, v.Name)
	}
	labels := map[string]string{}
	for k, val := range job.Spec.Labels {
		labels[k] = val
	}
	labels[types.LabelRecurringJob] = job.Name
	labels[types.LabelRecurringJobTick] = r.tickLabel()

	switch job.Spec.Task {
	case longhorn.RecurringJobTypeSnapshot, longhorn.RecurringJobTypeSnapshotForceCreate:
		return "", r.snapshot(ctx, job, v.Name, labels, job.Spec.Task == longhorn.RecurringJobTypeSnapshotForceCreate)
	case longhorn.RecurringJobTypeSnapshotDelete:
		return "", r.snapshotDelete(ctx, job, v.Name)
	case longhorn.RecurringJobTypeSnapshotCleanup:
		return "", r.snapshotCleanup(ctx, v.Name)
	case longhorn.RecurringJobTypeBackup, longhorn.RecurringJobTypeBackupForceCreate:
		return "", r.backup(ctx, job, v.Name, datastore.JobBackupTarget(job, v), labels, job.Spec.Task == longhorn.RecurringJobTypeBackupForceCreate)
	}
	return "", fmt.Errorf("task %q is not known", job.Spec.Task)
}

func (r *Executor) waitState(ctx context.Context, volume, state string) error {
	deadline := time.Now().Add(attachWait)
	for time.Now().Before(deadline) {
		v, err := r.API.Volume(ctx, volume)
		if err == nil && v.State == state {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("volume %s did not become %s within %s", volume, state, attachWait)
}

// jobSnapshots are the snapshots this job made and has not deleted,
// oldest first.
func jobSnapshots(all []client.Snapshot, job string) []client.Snapshot {
	var out []client.Snapshot
	for _, s := range all {
		if s.Labels[types.LabelRecurringJob] == job && !s.Removed {
			out = append(out, s)
		}
	}
	sortByCreated(out)
	return out
}

func sortByCreated(list []client.Snapshot) {
	sort.Slice(list, func(i, j int) bool {
		if c := compareCreated(list[i].Created, list[j].Created); c != 0 {
			return c < 0
		}
		return list[i].Name < list[j].Name
	})
}

// compareCreated orders two creation times as times: RFC 3339 with
// nanoseconds drops trailing zeros, so "…:05Z" sorts after "…:05.5Z" as a
// string though it is earlier. Times that do not parse compare as strings.
func compareCreated(a, b string) int {
	ta, errA := time.Parse(time.RFC3339Nano, a)
	tb, errB := time.Parse(time.RFC3339Nano, b)
	if errA != nil || errB != nil {
		return strings.Compare(a, b)
	}
	return ta.Compare(tb)
}

// deleteOldest deletes all but the newest keep snapshots of list, except
// those in protect.
func (r *Executor) deleteOldest(ctx context.Context, volume string, list []client.Snapshot, keep int, protect map[string]bool) error {
	return r.deleteExpired(ctx, volume, list, retention{newest: keep}, protect)
}

// deleteExpired deletes the snapshots of list (oldest first) that p no
// longer keeps, except those in protect.
func (r *Executor) deleteExpired(ctx context.Context, volume string, list []client.Snapshot, p retention, protect map[string]bool) error {
	created := make([]string, len(list))
	for i, s := range list {
		created[i] = s.Created
	}
	var errs []error
	for _, i := range p.expired(created) {
		if protect[list[i].Name] {
			continue
		}
		if err := r.API.DeleteSnapshot(ctx, volume, list[i].Name); err != nil && !client.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete snapshot %s: %w", list[i].Name, err))
		}
	}
	return errors.Join(errs...)
}

func hasTick(list []client.Snapshot, tick string) (string, bool) {
	for _, s := range list {
		if s.Labels[types.LabelRecurringJobTick] == tick {
			return s.Name, true
		}
	}
	return "", false
}

// snapshot cleans up first (keeping retain-1 of the job's snapshots, and
// under age-based those younger than retainAge), creates one unless
// cleanup failed (or force), keeps the newest retain (and the young), and
// purges.
func (r *Executor) snapshot(ctx context.Context, job *longhorn.RecurringJob, volume string, labels map[string]string, force bool) error {
	all, err := r.API.Snapshots(ctx, volume)
	if err != nil {
		return err
	}
	mine := jobSnapshots(all, job.Name)
	if _, done := hasTick(mine, labels[types.LabelRecurringJobTick]); !done {
		cleanupErr := r.deleteExpired(ctx, volume, mine, jobRetention(job, job.Spec.Retain-1, time.Now()), nil)
		if cleanupErr != nil && !force {
			return fmt.Errorf("cleanup before the snapshot failed, so none was taken: %w", cleanupErr)
		}
		if cleanupErr != nil {
			r.Log.WithError(cleanupErr).WithField("volume", volume).Warn("Cleanup failed; taking the snapshot anyway (force-create)")
		}
		if err := r.API.CreateSnapshot(ctx, volume, snapshotName(job.Name), labels); err != nil {
			return fmt.Errorf("create snapshot: %w", err)
		}
	}
	if all, err = r.API.Snapshots(ctx, volume); err != nil {
		return err
	}
	if err := r.deleteExpired(ctx, volume, jobSnapshots(all, job.Name), jobRetention(job, job.Spec.Retain, time.Now()), nil); err != nil {
		return err
	}
	return r.API.Purge(ctx, volume)
}

// snapshotDelete keeps the newest retain of the volume's user snapshots.
func (r *Executor) snapshotDelete(ctx context.Context, job *longhorn.RecurringJob, volume string) error {
	all, err := r.API.Snapshots(ctx, volume)
	if err != nil {
		return err
	}
	var user []client.Snapshot
	for _, s := range all {
		if s.UserCreated && !s.Removed {
			user = append(user, s)
		}
	}
	sortByCreated(user)
	if err := r.deleteOldest(ctx, volume, user, job.Spec.Retain, nil); err != nil {
		return err
	}
	return r.API.Purge(ctx, volume)
}

// snapshotCleanup removes system snapshots and purges removed ones.
func (r *Executor) snapshotCleanup(ctx context.Context, volume string) error {
	all, err := r.API.Snapshots(ctx, volume)
	if err != nil {
		return err
	}
	var system []client.Snapshot
	for _, s := range all {
		if !s.UserCreated && !s.Removed {
			system = append(system, s)
		}
	}
	if err := r.deleteOldest(ctx, volume, system, 0, nil); err != nil {
		return err
	}
	return r.API.Purge(ctx, volume)
}

// backup snapshots the volume, backs the snapshot up to target and waits
// for it, then keeps the newest retain of the job's backups in target and
// only the job's newest snapshot, which the next incremental backup
// starts from.
func (r *Executor) backup(ctx context.Context, job *longhorn.RecurringJob, volume, target string, labels map[string]string, force bool) error {
	tick := labels[types.LabelRecurringJobTick]
	backups, err := r.API.BackupsIn(ctx, volume, target)
	if err != nil {
		return err
	}
	name := ""
	for _, b := range backups {
		if b.Labels[types.LabelRecurringJob] == job.Name && b.Labels[types.LabelRecurringJobTick] == tick && b.State != string(longhorn.BackupStateError) {
			name = b.Name // this tick's backup exists: wait for it, make no other
		}
	}
	if name == "" {
		all, err := r.API.Snapshots(ctx, volume)
		if err != nil {
			return err
		}
		mine := jobSnapshots(all, job.Name)
		snap, done := hasTick(mine, tick)
		if !done {
			if err := r.deleteOldest(ctx, volume, mine, 1, nil); err != nil && !force {
				return fmt.Errorf("cleanup before the backup failed, so none was taken: %w", err)
			}
			snap = snapshotName(job.Name)
			if err := r.API.CreateSnapshot(ctx, volume, snap, labels); err != nil {
				return fmt.Errorf("create snapshot: %w", err)
			}
		}
		if name, err = r.API.BackupSnapshotTo(ctx, volume, snap, labels, r.backupMode(job), target); err != nil {
			return fmt.Errorf("back up snapshot %s to backup target %s: %w", snap, target, err)
		}
	}
	if err := r.waitBackup(ctx, volume, target, name); err != nil {
		return err
	}
	return r.backupRetention(ctx, job, volume, target)
}

// backupMode is the mode of this run's backups: full on every Nth run of
// a job whose full-backup-interval parameter is N (N > 0), as Longhorn
// counts (the job's runs, its executionCount), else incremental.
func (r *Executor) backupMode(job *longhorn.RecurringJob) string {
	n, err := strconv.Atoi(job.Spec.Parameters[types.RecurringJobParameterFullBackupInterval])
	if err != nil || n <= 0 {
		return backupstore.ModeIncremental
	}
	if runNumber(job, r.Tick)%int64(n) == 0 {
		return backupstore.ModeFull
	}
	return backupstore.ModeIncremental
}

// runNumber is which run of the job the run for tick is, counting from 1:
// the job's executionCount once its status has the tick (the manager
// runner records it before the run; the CronJob runner's mirror may not
// have yet), else the run after it.
func runNumber(job *longhorn.RecurringJob, tick time.Time) int64 {
	if last := job.Status.LastScheduleTime; last != nil && !last.Time.Before(tick) {
		return job.Status.ExecutionCount
	}
	return job.Status.ExecutionCount + 1
}

func (r *Executor) waitBackup(ctx context.Context, volume, target, name string) error {
	deadline := time.Now().Add(r.BackupTimeout)
	for {
		backups, err := r.API.BackupsIn(ctx, volume, target)
		if err != nil {
			return err
		}
		for _, b := range backups {
			if b.Name != name {
				continue
			}
			switch b.State {
			case string(longhorn.BackupStateCompleted):
				return nil
			case string(longhorn.BackupStateError):
				return fmt.Errorf("backup %s failed: %s", name, b.Error)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("backup %s did not complete within %s", name, r.BackupTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// backupRetention deletes the job's completed backups in target its
// retention no longer keeps (beyond retain, or under age-based both
// beyond retain and older than retainAge: counted in each target apart)
// and the job's snapshots but the newest, sparing any a running backup
// reads.
func (r *Executor) backupRetention(ctx context.Context, job *longhorn.RecurringJob, volume, target string) error {
	backups, err := r.API.BackupsIn(ctx, volume, target)
	if err != nil {
		return err
	}
	var done []client.Backup
	reading := map[string]bool{}
	for _, b := range backups {
		if b.State == string(longhorn.BackupStateInProgress) {
			reading[b.SnapshotName] = true
		}
		if b.Labels[types.LabelRecurringJob] == job.Name && b.State == string(longhorn.BackupStateCompleted) {
			done = append(done, b)
		}
	}
	sort.Slice(done, func(i, j int) bool { return compareCreated(done[i].Created, done[j].Created) < 0 })
	created := make([]string, len(done))
	for i, b := range done {
		created[i] = b.Created
	}
	// The job's newest completed backup is never deleted, whatever the
	// policy says: an age-based job with retain 0 keeps it too.
	var errs []error
	for _, i := range jobRetention(job, max(job.Spec.Retain, 1), time.Now()).expired(created) {
		if err := r.API.DeleteBackupIn(ctx, volume, target, done[i].Name); err != nil && !client.IsNotFound(err) {
			// Only logged: the backup itself succeeded.
			r.Log.WithError(err).WithField("backup", done[i].Name).Warn("Cannot delete an old backup")
		}
	}
	all, err := r.API.Snapshots(ctx, volume)
	if err != nil {
		return err
	}
	errs = append(errs, r.deleteOldest(ctx, volume, jobSnapshots(all, job.Name), 1, reading))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return r.API.Purge(ctx, volume)
}
