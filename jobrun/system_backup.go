package jobrun

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/cadence-storage/longhorn-manager/client"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// systemBackupPoll is how often a run looks at its system backup.
const systemBackupPoll = 2 * time.Second

// systemBackupName is the system backup a job's run for tick makes: the
// job's name and the tick, so that a second run for the same tick finds
// the first's instead of making another, and the job's own are told
// from any other by name alone (see ownSystemBackup).
func systemBackupName(job string, tick time.Time) string {
	return job + "-" + strings.ToLower(tick.UTC().Format("20060102T150405Z"))
}

// ownSystemBackup tells whether a system backup is one job made.
func ownSystemBackup(job, name string) bool {
	rest, ok := strings.CutPrefix(name, job+"-")
	return ok && tickSuffix.MatchString(rest)
}

var tickSuffix = regexp.MustCompile(`^[0-9]{8}t[0-9]{6}z$`)

// runSystemBackup is a system-backup job's run: one SystemBackup through
// the manager's API, waited for until Ready or Error, then the job's
// system backups beyond its retain deleted (expiredSystemBackups).
func (r *Executor) runSystemBackup(ctx context.Context, job *longhorn.RecurringJob, log *logrus.Entry) Result {
	name := systemBackupName(job.Name, r.Tick)
	log = log.WithField("systemBackup", name)
	fail := func(err error) Result {
		log.WithError(err).Error("System backup failed")
		r.event(ctx, job, corev1.EventTypeWarning, "SystemBackupFailed", fmt.Sprintf("run for %s: system backup %s: %v", r.Tick.UTC().Format(time.RFC3339), name, err))
		return Result{Failed: 1}
	}
	policy := job.Spec.Parameters[types.RecurringJobParameterVolumeBackupPolicy]
	_, err := r.API.CreateSystemBackup(ctx, name, policy)
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusConflict {
		log.Info("This tick's system backup exists already; waiting for it")
		err = nil
	}
	if err != nil {
		return fail(err)
	}
	timeout := r.BackupTimeout
	if timeout <= 0 {
		timeout = time.Hour
	}
	deadline := time.Now().Add(timeout)
	for {
		sb, err := r.API.SystemBackup(ctx, name)
		if err != nil {
			return fail(err)
		}
		if sb.State == string(longhorn.SystemBackupStateReady) {
			break
		}
		if sb.State == string(longhorn.SystemBackupStateError) {
			return fail(errors.New(sb.Error))
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("not Ready within %s (state %q)", timeout, sb.State))
		}
		select {
		case <-ctx.Done():
			return fail(context.Cause(ctx))
		case <-time.After(systemBackupPoll):
		}
	}
	log.Info("System backup Ready")
	if err := r.systemBackupRetention(ctx, job, log); err != nil {
		log.WithError(err).Warn("The job's older system backups could not all be deleted; the next run tries again")
	}
	r.event(ctx, job, corev1.EventTypeNormal, "Completed", fmt.Sprintf("run for %s: system backup %s Ready", r.Tick.UTC().Format(time.RFC3339), name))
	return Result{Succeeded: 1}
}

// systemBackupRetention deletes the job's system backups that
// expiredSystemBackups says are beyond its retain (their archives go
// with them).
func (r *Executor) systemBackupRetention(ctx context.Context, job *longhorn.RecurringJob, log *logrus.Entry) error {
	list, err := r.API.SystemBackups(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range expiredSystemBackups(job.Name, job.Spec.Retain, list) {
		if err := r.API.DeleteSystemBackup(ctx, name); err != nil && !client.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		log.WithFields(logrus.Fields{"expired": name, "retain": job.Spec.Retain}).Info("Deleted a system backup beyond the job's retain")
	}
	return errors.Join(errs...)
}

// expiredSystemBackups lists, newest first, the job's system backups
// beyond its retain (at least one). Only Ready ones count toward it: a
// run of failures must not push out the good ones a restore needs. A
// failed one is kept while it is among the newest retain failures and
// newer than the oldest good one kept (it says why the runs fail), and
// expires after. Those still being made are neither counted nor
// deleted.
func expiredSystemBackups(job string, retain int, list []client.SystemBackup) []string {
	var own []client.SystemBackup
	for _, sb := range list {
		if ownSystemBackup(job, sb.Name) && (sb.State == string(longhorn.SystemBackupStateReady) || sb.State == string(longhorn.SystemBackupStateError)) {
			own = append(own, sb)
		}
	}
	// The tick in the name orders them: newest first.
	sort.Slice(own, func(i, j int) bool { return own[i].Name > own[j].Name })
	keep := max(retain, 1)
	var expired []string
	good, failed := 0, 0
	for _, sb := range own {
		if sb.State == string(longhorn.SystemBackupStateReady) {
			if good++; good > keep {
				expired = append(expired, sb.Name)
			}
			continue
		}
		if failed++; failed > keep || good >= keep {
			expired = append(expired, sb.Name)
		}
	}
	return expired
}
