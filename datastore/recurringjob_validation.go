package datastore

import (
	"context"
	"fmt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/schedule"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/systembackup"
	"github.com/cadence-storage/longhorn-manager/types"
)

// RecurringJobNameMaxLength bounds job names, so the CronJob, its Jobs and
// the snapshot names derived from the job stay within Kubernetes' and
// Longhorn's limits.
const RecurringJobNameMaxLength = 40

var recurringJobNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]+$`)

// AgeRetentionTasks are the tasks the age-based retention policy applies
// to: those that keep snapshots or backups of their own.
var AgeRetentionTasks = map[longhorn.RecurringJobType]bool{
	longhorn.RecurringJobTypeSnapshot: true, longhorn.RecurringJobTypeSnapshotForceCreate: true,
	longhorn.RecurringJobTypeBackup: true, longhorn.RecurringJobTypeBackupForceCreate: true,
}

func ageRetentionTaskNames() []string {
	var out []string
	for _, t := range longhorn.RecurringJobTypes {
		if AgeRetentionTasks[t] {
			out = append(out, string(t))
		}
	}
	return out
}

// ValidateRecurringJob checks every rule of a RecurringJob, including the
// ones the apiserver cannot check: the cron expression and retain against
// the recurring-job-max-retention setting. The API refuses a job that
// fails it; the controller marks such a job Ready=False and schedules
// nothing. now anchors the "can this schedule ever fire" check.
func ValidateRecurringJob(job *longhorn.RecurringJob, maxRetention int, now time.Time) error {
	spec := job.Spec
	var errs field.ErrorList
	specPath := field.NewPath("spec")

	name := job.Name
	switch {
	case name == "":
		errs = append(errs, field.Required(field.NewPath("metadata", "name"), "a recurring job needs a name"))
	case len(name) > RecurringJobNameMaxLength:
		errs = append(errs, field.TooLong(field.NewPath("metadata", "name"), name, RecurringJobNameMaxLength))
	case !recurringJobNamePattern.MatchString(name):
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, "must be lowercase letters, digits, '-', '_' or '.', start with a letter or digit, and be at least 2 characters"))
	}
	if spec.Task == longhorn.RecurringJobTypeSystemBackup && strings.Contains(name, "_") {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, "a system-backup job names its system backups after itself: no '_'"))
	}
	if spec.Name != "" && spec.Name != name {
		errs = append(errs, field.Invalid(specPath.Child("name"), spec.Name, fmt.Sprintf("must equal the object name %q", name)))
	}

	if !slices.Contains(longhorn.RecurringJobTypes, spec.Task) {
		errs = append(errs, field.NotSupported(specPath.Child("task"), spec.Task, longhorn.RecurringJobTypes))
	}

	switch spec.Task {
	case longhorn.RecurringJobTypeBackup, longhorn.RecurringJobTypeBackupForceCreate, longhorn.RecurringJobTypeBackupVerify:
		// Where the backups go; for a drill, the one target drilled.
	default:
		if spec.BackupTargetName != "" {
			errs = append(errs, field.Invalid(specPath.Child("backupTargetName"), spec.BackupTargetName,
				fmt.Sprintf("only a %s, %s or %s job names a backup target; a %s job has none", longhorn.RecurringJobTypeBackup,
					longhorn.RecurringJobTypeBackupForceCreate, longhorn.RecurringJobTypeBackupVerify, spec.Task)))
		}
	}

	errs = append(errs, validateCron(specPath.Child("cron"), spec.Cron, now)...)
	if spec.TimeZone != "" {
		if _, err := schedule.LoadLocation(spec.TimeZone); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("timeZone"), spec.TimeZone, "must be an IANA time zone such as Europe/Paris; empty means UTC"))
		}
	}
	if spec.StartingDeadlineSeconds != nil && *spec.StartingDeadlineSeconds < MinStartingDeadlineSeconds {
		errs = append(errs, field.Invalid(specPath.Child("startingDeadlineSeconds"), *spec.StartingDeadlineSeconds,
			fmt.Sprintf("must be at least %d: the CronJob controller looks every 10 s, so a shorter deadline can miss every run; leave it unset for no deadline", MinStartingDeadlineSeconds)))
	}

	retainPath := specPath.Child("retain")
	minRetain := 1
	switch spec.Task {
	case longhorn.RecurringJobTypeSnapshotCleanup, longhorn.RecurringJobTypeBackupVerify, longhorn.RecurringJobTypeFilesystemTrim:
		// None keeps anything: retain has no use.
		minRetain = 0
	}
	switch spec.RetentionPolicy {
	case "", longhorn.RecurringJobRetentionPolicyCountBased:
	case longhorn.RecurringJobRetentionPolicyAgeBased:
		policyPath := specPath.Child("retentionPolicy")
		if !AgeRetentionTasks[spec.Task] {
			errs = append(errs, field.Invalid(policyPath, spec.RetentionPolicy,
				fmt.Sprintf("applies to the snapshot and backup tasks (%s), not %s", strings.Join(ageRetentionTaskNames(), ", "), spec.Task)))
		}
		if spec.RetainAge == nil || spec.RetainAge.Duration <= 0 {
			errs = append(errs, field.Required(specPath.Child("retainAge"),
				"age-based retention needs a positive duration such as 72h: how old a snapshot or backup may grow"))
		}
		// Age alone may decide: retain is then the newest kept whatever
		// their age.
		minRetain = 0
	default:
		errs = append(errs, field.NotSupported(specPath.Child("retentionPolicy"), spec.RetentionPolicy,
			[]longhorn.RecurringJobRetentionPolicy{longhorn.RecurringJobRetentionPolicyCountBased, longhorn.RecurringJobRetentionPolicyAgeBased}))
	}
	if spec.RetainAge != nil && spec.RetainAge.Duration < 0 {
		errs = append(errs, field.Invalid(specPath.Child("retainAge"), spec.RetainAge.Duration.String(), "must not be negative"))
	}
	if spec.Retain < minRetain || spec.Retain > maxRetention {
		errs = append(errs, field.Invalid(retainPath, spec.Retain,
			fmt.Sprintf("must be between %d and %d (the %s setting) for task %s", minRetain, maxRetention, types.SettingNameRecurringJobMaxRetention, spec.Task)))
	}

	if spec.Concurrency < 1 {
		errs = append(errs, field.Invalid(specPath.Child("concurrency"), spec.Concurrency, "must be at least 1"))
	}

	seen := map[string]bool{}
	for i, group := range spec.Groups {
		p := specPath.Child("groups").Index(i)
		if seen[group] {
			errs = append(errs, field.Duplicate(p, group))
			continue
		}
		seen[group] = true
		for _, msg := range validation.IsQualifiedName(types.RecurringJobGroupLabelKey(group)) {
			errs = append(errs, field.Invalid(p, group, "must be usable as the label "+types.RecurringJobGroupLabelKey(group)+": "+msg))
		}
	}

	errs = append(errs, validateParameters(specPath.Child("parameters"), spec)...)

	for key, value := range spec.Labels {
		p := specPath.Child("labels").Key(key)
		for _, msg := range validation.IsQualifiedName(key) {
			errs = append(errs, field.Invalid(p, key, "must be a valid label key: "+msg))
		}
		for _, msg := range validation.IsValidLabelValue(value) {
			errs = append(errs, field.Invalid(p, value, "must be a valid label value: "+msg))
		}
	}
	return errs.ToAggregate()
}

// validateParameters refuses a parameter the job's task does not take
// and a value that is not what it must be: full-backup-interval, on a
// backup task, a whole number from 0 (no full backups) up; on another
// task only 0, which Longhorn's UI sends with every job; full-drill, on a
// backup-verify task, true or false.
func validateParameters(p *field.Path, spec longhorn.RecurringJobSpec) field.ErrorList {
	var errs field.ErrorList
	for _, key := range slices.Sorted(maps.Keys(spec.Parameters)) {
		value := spec.Parameters[key]
		kp := p.Key(key)
		switch key {
		case types.RecurringJobParameterFullBackupInterval:
			if spec.Task != longhorn.RecurringJobTypeBackup && spec.Task != longhorn.RecurringJobTypeBackupForceCreate {
				// Longhorn's UI sends "0" with every task: no full
				// backups, which is what any other task takes.
				if value != "0" && value != "" {
					errs = append(errs, field.Invalid(kp, value, fmt.Sprintf("applies to the backup and backup-force-create tasks only, not %s (0 is accepted and does nothing)", spec.Task)))
				}
				continue
			}
			if n, err := strconv.Atoi(value); err != nil || n < 0 || strings.TrimSpace(value) != value {
				errs = append(errs, field.Invalid(kp, value, "must be a whole number: every Nth run takes full backups, 0 none"))
			}
		case types.RecurringJobParameterFullDrill:
			if spec.Task != longhorn.RecurringJobTypeBackupVerify {
				errs = append(errs, field.Invalid(kp, value, fmt.Sprintf("applies to the backup-verify task only, not %s", spec.Task)))
				continue
			}
			if _, err := ParseFullDrill(value); err != nil {
				errs = append(errs, field.Invalid(kp, value, err.Error()))
			}
		case types.RecurringJobParameterVolumeBackupPolicy:
			if spec.Task != longhorn.RecurringJobTypeSystemBackup {
				errs = append(errs, field.Invalid(kp, value, fmt.Sprintf("applies to the system-backup task only, not %s", spec.Task)))
				continue
			}
			if _, err := systembackup.ParsePolicy(value); err != nil {
				errs = append(errs, field.Invalid(kp, value, "must be if-not-present, always or disabled"))
			}
		default:
			errs = append(errs, field.NotSupported(kp, key, []string{types.RecurringJobParameterFullBackupInterval, types.RecurringJobParameterFullDrill,
				types.RecurringJobParameterVolumeBackupPolicy}))
		}
	}
	return errs
}

// validateCron accepts what robfig/cron's ParseStandard accepts (five
// fields or a descriptor such as @daily or @every 1h), except a time zone
// prefix, and refuses a schedule that can never fire.
// MinStartingDeadlineSeconds is the shortest starting deadline a job may
// set. Kubernetes' CronJob controller takes 0 and then never runs the job;
// under 10 s it may miss runs.
const MinStartingDeadlineSeconds = 10

func validateCron(p *field.Path, expr string, now time.Time) field.ErrorList {
	trimmed := strings.TrimSpace(expr)
	if trimmed == "" {
		return field.ErrorList{field.Required(p, "a cron expression such as \"0 * * * *\" or \"@daily\"")}
	}
	if strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") {
		return field.ErrorList{field.Invalid(p, expr, "must not set a time zone inside the expression; use timeZone")}
	}
	if rest, ok := strings.CutPrefix(trimmed, "@every "); ok {
		// cron turns any interval under a second (zero and negative ones
		// included) into one second; the CronJob controller looks once a
		// minute. Whole minutes only, so both runners agree.
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || d < time.Minute || d%time.Minute != 0 {
			return field.ErrorList{field.Invalid(p, expr, "@every must be followed by a whole number of minutes, at least one, such as \"@every 90m\"")}
		}
	}
	if _, err := cron.ParseStandard(trimmed); err != nil {
		return field.ErrorList{field.Invalid(p, expr, "is not a standard cron expression: "+err.Error())}
	}
	// The runner's own search (ten years ahead), so what is accepted fires.
	if s, err := schedule.Parse(trimmed, ""); err != nil || s.Next(now).IsZero() {
		return field.ErrorList{field.Invalid(p, expr, "never fires: no date matches it")}
	}
	return nil
}

// ValidateRecurringJob validates a job against the current
// recurring-job-max-retention setting and the BackupTargets: the target
// a backup job names must exist, in the cache or, just created and not
// yet cached, in the API. Only the API checks that: a target
// deleted after the job was written fails the job's backups at run time
// (the snapshotBackup each makes is refused naming the field), and does
// not stop the job being scheduled.
func (ds *DataStore) ValidateRecurringJob(ctx context.Context, job *longhorn.RecurringJob, now time.Time) error {
	maxRetention, err := ds.GetSettingAsInt(types.SettingNameRecurringJobMaxRetention)
	if err != nil {
		return err
	}
	if err := ValidateRecurringJob(job, maxRetention, now); err != nil {
		return err
	}
	if job.Spec.Task == longhorn.RecurringJobTypeSystemBackup {
		if url, err := ds.GetSettingValue(types.SettingNameBackupTarget); err != nil {
			return err
		} else if url == "" {
			return fmt.Errorf("spec.task: a system-backup job stores its system backups in the default backup target, and the %s setting is empty; set it first", types.SettingNameBackupTarget)
		}
	}
	// The default target is always there (the settings hold it).
	if name := job.Spec.BackupTargetName; name != "" && TargetName(name) != DefaultBackupTargetName {
		if _, err := CachedOrFresh(ctx, name, ds.GetBackupTargetRO, ds.GetBackupTargetFresh); apierrors.IsNotFound(err) {
			return fmt.Errorf("spec.backupTargetName: BackupTarget %q does not exist; create it first, or leave the field empty for each volume's own target", name)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// CheckRecurringJobToRun is the rule that decides whether a job is
// scheduled and run: ValidateRecurringJob, except for a job whose current
// spec the manager accepted before (status.observedGeneration is its
// generation) and whose only fault is a retain above a
// recurring-job-max-retention lowered since. Such a job keeps running
// with its own retain (a lower one would delete snapshots and backups the
// user keeps); warning says why it breaks the setting. The API checks
// specs it writes with ValidateRecurringJob alone.
func CheckRecurringJobToRun(job *longhorn.RecurringJob, maxRetention int, now time.Time) (warning string, err error) {
	err = ValidateRecurringJob(job, maxRetention, now)
	if err == nil || job.Status.ObservedGeneration != job.Generation || job.Generation == 0 {
		return "", err
	}
	if ValidateRecurringJob(job, math.MaxInt32, now) != nil {
		return "", err
	}
	return fmt.Sprintf("spec.retain %d is above the %s setting (%d), lowered after this spec was accepted: the job keeps running with retain %d; lower retain to follow the setting",
		job.Spec.Retain, types.SettingNameRecurringJobMaxRetention, maxRetention, job.Spec.Retain), nil
}

// CheckRecurringJobToRun is CheckRecurringJobToRun against the current
// recurring-job-max-retention setting.
func (ds *DataStore) CheckRecurringJobToRun(job *longhorn.RecurringJob, now time.Time) (string, error) {
	maxRetention, err := ds.GetSettingAsInt(types.SettingNameRecurringJobMaxRetention)
	if err != nil {
		return "", err
	}
	return CheckRecurringJobToRun(job, maxRetention, now)
}
