package datastore

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestValidateRecurringJob(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	base := func() *longhorn.RecurringJob {
		return &longhorn.RecurringJob{
			ObjectMeta: metav1.ObjectMeta{Name: "daily"},
			Spec: longhorn.RecurringJobSpec{
				Name: "daily", Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 0 * * *",
				Retain: 5, Concurrency: 10, Groups: []string{"default"}, Labels: map[string]string{"tier": "gold"},
			},
		}
	}
	cases := []struct {
		name   string
		change func(j *longhorn.RecurringJob)
		want   string // "" means valid; otherwise a fragment of the error
	}{
		{"a plain snapshot job is valid", func(*longhorn.RecurringJob) {}, ""},
		{"a backup job may name a backup target", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.BackupTargetName = longhorn.RecurringJobTypeBackup, "offsite"
		}, ""},
		{"a backup-verify job may name the one backup target it drills", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.BackupTargetName = longhorn.RecurringJobTypeBackupVerify, "offsite"
		}, ""},
		{"a snapshot job naming a backup target is refused, naming the field", func(j *longhorn.RecurringJob) { j.Spec.BackupTargetName = "offsite" }, "spec.backupTargetName"},
		{"descriptors are accepted", func(j *longhorn.RecurringJob) { j.Spec.Cron = "@hourly" }, ""},
		{"@every durations are accepted", func(j *longhorn.RecurringJob) { j.Spec.Cron = "@every 1h30m" }, ""},
		{"@every whole minutes are accepted", func(j *longhorn.RecurringJob) { j.Spec.Cron = "@every 15m" }, ""},
		{"@every under a minute is refused", func(j *longhorn.RecurringJob) { j.Spec.Cron = "@every 1s" }, "whole number of minutes"},
		{"@every 0s is refused", func(j *longhorn.RecurringJob) { j.Spec.Cron = "@every 0s" }, "whole number of minutes"},
		{"a negative @every is refused", func(j *longhorn.RecurringJob) { j.Spec.Cron = "@every -1h" }, "whole number of minutes"},
		{"@every with seconds is refused", func(j *longhorn.RecurringJob) { j.Spec.Cron = "@every 1m30s" }, "whole number of minutes"},
		{"a cron with surrounding whitespace is accepted", func(j *longhorn.RecurringJob) { j.Spec.Cron = " @daily\n" }, ""},
		{"startingDeadlineSeconds 0 is refused", func(j *longhorn.RecurringJob) { j.Spec.StartingDeadlineSeconds = ptr.To[int64](0) }, "spec.startingDeadlineSeconds"},
		{"startingDeadlineSeconds 9 is refused", func(j *longhorn.RecurringJob) { j.Spec.StartingDeadlineSeconds = ptr.To[int64](9) }, "at least 10"},
		{"startingDeadlineSeconds 10 is accepted", func(j *longhorn.RecurringJob) { j.Spec.StartingDeadlineSeconds = ptr.To[int64](10) }, ""},
		{"step values are accepted", func(j *longhorn.RecurringJob) { j.Spec.Cron = "30 6-16/4 * * 1-5" }, ""},
		{"an empty spec name is fine", func(j *longhorn.RecurringJob) { j.Spec.Name = "" }, ""},
		{"a cron that is not cron is refused", func(j *longhorn.RecurringJob) { j.Spec.Cron = "every day" }, "spec.cron"},
		{"six fields are refused", func(j *longhorn.RecurringJob) { j.Spec.Cron = "0 0 0 * * *" }, "spec.cron"},
		{"@reboot is refused", func(j *longhorn.RecurringJob) { j.Spec.Cron = "@reboot" }, "spec.cron"},
		{"a schedule that never fires is refused", func(j *longhorn.RecurringJob) { j.Spec.Cron = "0 0 30 2 *" }, "never fires"},
		{"a time zone inside cron is refused", func(j *longhorn.RecurringJob) { j.Spec.Cron = "CRON_TZ=Europe/Paris 0 0 * * *" }, "time zone"},
		{"an empty cron is refused", func(j *longhorn.RecurringJob) { j.Spec.Cron = "  " }, "spec.cron: Required"},
		{"an unknown task is refused", func(j *longhorn.RecurringJob) { j.Spec.Task = "snapshot-all" }, "spec.task: Unsupported value"},
		{"retain 0 is refused for snapshots", func(j *longhorn.RecurringJob) { j.Spec.Retain = 0 }, "spec.retain"},
		{"retain 0 is allowed for snapshot-cleanup", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Retain = longhorn.RecurringJobTypeSnapshotCleanup, 0
		}, ""},
		{"a backup-verify job, which keeps nothing, is valid with retain 0", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Retain = longhorn.RecurringJobTypeBackupVerify, 0
		}, ""},
		{"full-backup-interval on a backup-verify job is refused", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Parameters = longhorn.RecurringJobTypeBackupVerify, map[string]string{"full-backup-interval": "3"}
		}, "spec.parameters[full-backup-interval]"},
		{"full-drill on a backup-verify job is accepted", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Retain, j.Spec.Parameters = longhorn.RecurringJobTypeBackupVerify, 0, map[string]string{"full-drill": "true"}
		}, ""},
		{"a full-drill that is not true or false is refused, naming the parameter", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Retain, j.Spec.Parameters = longhorn.RecurringJobTypeBackupVerify, 0, map[string]string{"full-drill": "yes"}
		}, "spec.parameters[full-drill]: Invalid value: \"yes\": must be true or false"},
		{"full-drill on a backup job is refused", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Parameters = longhorn.RecurringJobTypeBackup, map[string]string{"full-drill": "true"}
		}, "spec.parameters[full-drill]: Invalid value: \"true\": applies to the backup-verify task only"},
		{"a system-backup job with its policy is accepted", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Parameters = longhorn.RecurringJobTypeSystemBackup, map[string]string{"volume-backup-policy": "always"}
		}, ""},
		{"an unknown volume-backup-policy is refused, naming the parameter", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Parameters = longhorn.RecurringJobTypeSystemBackup, map[string]string{"volume-backup-policy": "sometimes"}
		}, "spec.parameters[volume-backup-policy]: Invalid value: \"sometimes\": must be if-not-present, always or disabled"},
		{"volume-backup-policy on a backup job is refused", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Parameters = longhorn.RecurringJobTypeBackup, map[string]string{"volume-backup-policy": "always"}
		}, "spec.parameters[volume-backup-policy]: Invalid value: \"always\": applies to the system-backup task only"},
		{"a system-backup job whose name its system backups cannot take is refused", func(j *longhorn.RecurringJob) {
			j.Name, j.Spec.Task = "nightly_sb", longhorn.RecurringJobTypeSystemBackup
		}, "metadata.name: Invalid value: \"nightly_sb\": a system-backup job names its system backups after itself"},
		{"retain above the setting is refused", func(j *longhorn.RecurringJob) { j.Spec.Retain = 51 }, "between 1 and 50"},
		{"retain at the setting is allowed", func(j *longhorn.RecurringJob) { j.Spec.Retain = 50 }, ""},
		{"negative retain is refused for backups", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Retain = longhorn.RecurringJobTypeBackup, -1
		}, "spec.retain"},
		{"concurrency 0 is refused", func(j *longhorn.RecurringJob) { j.Spec.Concurrency = 0 }, "spec.concurrency"},
		{"full-backup-interval on a backup job is accepted", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Parameters = longhorn.RecurringJobTypeBackup, map[string]string{"full-backup-interval": "7"}
		}, ""},
		{"full-backup-interval 0 (no full backups) is accepted", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Parameters = longhorn.RecurringJobTypeBackupForceCreate, map[string]string{"full-backup-interval": "0"}
		}, ""},
		{"full-backup-interval 0 on a snapshot job, as Longhorn's UI sends it, is accepted", func(j *longhorn.RecurringJob) {
			j.Spec.Parameters = map[string]string{"full-backup-interval": "0"}
		}, ""},
		{"full-backup-interval on a snapshot job is refused", func(j *longhorn.RecurringJob) {
			j.Spec.Parameters = map[string]string{"full-backup-interval": "7"}
		}, "spec.parameters[full-backup-interval]: Invalid value: \"7\": applies to the backup and backup-force-create tasks only"},
		{"a full-backup-interval that is not a whole number is refused", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Parameters = longhorn.RecurringJobTypeBackup, map[string]string{"full-backup-interval": "weekly"}
		}, "must be a whole number"},
		{"a negative full-backup-interval is refused", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Parameters = longhorn.RecurringJobTypeBackup, map[string]string{"full-backup-interval": "-2"}
		}, "must be a whole number"},
		{"an unknown parameter is refused, naming the known ones", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Parameters = longhorn.RecurringJobTypeBackup, map[string]string{"retention-days": "7"}
		}, "spec.parameters[retention-days]: Unsupported value: \"retention-days\": supported values: \"full-backup-interval\", \"full-drill\", \"volume-backup-policy\""},
		{"age-based retention with an age is accepted", func(j *longhorn.RecurringJob) {
			j.Spec.RetentionPolicy, j.Spec.RetainAge = longhorn.RecurringJobRetentionPolicyAgeBased, &metav1.Duration{Duration: 72 * time.Hour}
		}, ""},
		{"age-based retention with retain 0 (age alone) is accepted", func(j *longhorn.RecurringJob) {
			j.Spec.Task, j.Spec.Retain = longhorn.RecurringJobTypeBackup, 0
			j.Spec.RetentionPolicy, j.Spec.RetainAge = longhorn.RecurringJobRetentionPolicyAgeBased, &metav1.Duration{Duration: time.Hour}
		}, ""},
		{"age-based retention with no age is refused", func(j *longhorn.RecurringJob) {
			j.Spec.RetentionPolicy = longhorn.RecurringJobRetentionPolicyAgeBased
		}, "spec.retainAge: Required value: age-based retention needs a positive duration"},
		{"age-based retention with age 0s is refused", func(j *longhorn.RecurringJob) {
			j.Spec.RetentionPolicy, j.Spec.RetainAge = longhorn.RecurringJobRetentionPolicyAgeBased, &metav1.Duration{}
		}, "spec.retainAge: Required value"},
		{"age-based retention on snapshot-delete is refused", func(j *longhorn.RecurringJob) {
			j.Spec.Task = longhorn.RecurringJobTypeSnapshotDelete
			j.Spec.RetentionPolicy, j.Spec.RetainAge = longhorn.RecurringJobRetentionPolicyAgeBased, &metav1.Duration{Duration: time.Hour}
		}, "spec.retentionPolicy: Invalid value: \"age-based\": applies to the snapshot and backup tasks"},
		{"an unknown retention policy is refused", func(j *longhorn.RecurringJob) { j.Spec.RetentionPolicy = "newest" }, "spec.retentionPolicy: Unsupported value"},
		{"count-based with Longhorn's retainAge 0s is accepted", func(j *longhorn.RecurringJob) {
			j.Spec.RetentionPolicy, j.Spec.RetainAge = longhorn.RecurringJobRetentionPolicyCountBased, &metav1.Duration{}
		}, ""},
		{"a negative retainAge is refused", func(j *longhorn.RecurringJob) { j.Spec.RetainAge = &metav1.Duration{Duration: -time.Hour} }, "spec.retainAge"},
		{"a name with capitals is refused", func(j *longhorn.RecurringJob) { j.Name, j.Spec.Name = "Daily", "Daily" }, "metadata.name"},
		{"a 41-character name is refused", func(j *longhorn.RecurringJob) {
			j.Name, j.Spec.Name = strings.Repeat("a", 41), ""
		}, "metadata.name: Too long"},
		{"a spec name unlike the object name is refused", func(j *longhorn.RecurringJob) { j.Spec.Name = "weekly" }, "spec.name"},
		{"a group that cannot be a label is refused", func(j *longhorn.RecurringJob) { j.Spec.Groups = []string{"a/b"} }, "spec.groups[0]"},
		{"a duplicate group is refused", func(j *longhorn.RecurringJob) { j.Spec.Groups = []string{"g", "g"} }, "spec.groups[1]: Duplicate"},
		{"a bad label key is refused", func(j *longhorn.RecurringJob) { j.Spec.Labels = map[string]string{"bad key": "v"} }, "spec.labels[bad key]"},
		{"an IANA time zone is accepted", func(j *longhorn.RecurringJob) { j.Spec.TimeZone = "Europe/Paris" }, ""},
		{"an unknown time zone is refused", func(j *longhorn.RecurringJob) { j.Spec.TimeZone = "Mars/Base" }, "spec.timeZone"},
		{"the machine's zone is refused", func(j *longhorn.RecurringJob) { j.Spec.TimeZone = "Local" }, "spec.timeZone"},
		{"a bad label value is refused", func(j *longhorn.RecurringJob) { j.Spec.Labels = map[string]string{"k": "not ok!"} }, "valid label value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			job := base()
			c.change(job)
			err := ValidateRecurringJob(job, 50, now)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("want an error saying %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %q does not say %q", err, c.want)
			}
		})
	}
}

func TestCheckRecurringJobToRun(t *testing.T) {
	now := time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)
	job := func(generation, observed int64, retain int, cron string) *longhorn.RecurringJob {
		return &longhorn.RecurringJob{
			ObjectMeta: metav1.ObjectMeta{Name: "daily", Generation: generation},
			Spec:       longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeBackup, Cron: cron, Retain: retain, Concurrency: 1},
			Status:     longhorn.RecurringJobStatus{ObservedGeneration: observed},
		}
	}
	for _, tc := range []struct {
		name             string
		job              *longhorn.RecurringJob
		wantErr, wantMsg string
	}{
		{"within the setting", job(3, 3, 40, "@daily"), "", ""},
		{"accepted, then the setting was lowered: runs, with a warning", job(3, 3, 80, "@daily"), "", "spec.retain 80 is above"},
		{"a new spec above the setting is refused", job(4, 3, 80, "@daily"), "spec.retain", ""},
		{"never accepted: refused", job(1, 0, 80, "@daily"), "spec.retain", ""},
		{"accepted, but another fault too: refused", job(3, 3, 80, "0 0 30 2 *"), "never fires", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := CheckRecurringJobToRun(tc.job, 50, now)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("want no error, got %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
			case !strings.Contains(msg, tc.wantMsg) || (tc.wantMsg == "" && msg != ""):
				t.Fatalf("warning %q, want %q", msg, tc.wantMsg)
			}
		})
	}
}
