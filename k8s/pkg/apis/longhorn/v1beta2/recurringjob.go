package v1beta2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// RecurringJobSpec is a scheduled task applied to every volume that
// selects the job by label, directly or through one of its groups.
type RecurringJobSpec struct {
	// The job's name; equals the object's name.
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9_.-]+$`
	// +optional
	Name string `json:"name,omitempty"`
	// Groups whose volumes run this job; "default" is every volume that
	// selects no job and no group of its own.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +listType=set
	// +optional
	Groups []string `json:"groups,omitempty"`
	// The task the job performs on each volume; fixed once created.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="task is immutable"
	Task RecurringJobType `json:"task"`
	// The schedule: five cron fields or a descriptor such as @daily.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Cron string `json:"cron"`
	// How many snapshots or backups of this job each volume keeps: the
	// newest retain. Under the age-based retention policy, the newest
	// retain are kept whatever their age (0: age alone decides).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Retain int `json:"retain"`
	// The BackupTarget a backup job's backups go to (not Longhorn's:
	// longhorn/longhorn#11421); empty: each volume's own target. Its
	// retention counts the backups in that target only. A backup-verify
	// job naming one drills the backups in that target only; naming
	// none, in every target that holds backups of the volume.
	// +optional
	BackupTargetName string `json:"backupTargetName,omitempty"`
	// RetentionPolicy (Longhorn v1.12) says what a snapshot or backup job
	// keeps: count-based (the default) the newest retain; age-based also
	// whatever is younger than retainAge.
	// +optional
	RetentionPolicy RecurringJobRetentionPolicy `json:"retentionPolicy,omitempty"`
	// RetainAge (Longhorn v1.12), a Go duration such as 72h, is how old a
	// snapshot or backup of the job may grow before an age-based job
	// deletes it; read only under the age-based policy, which needs it
	// positive.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+$')",message="retainAge must be a Go duration such as 72h or 90m"
	// +optional
	RetainAge *metav1.Duration `json:"retainAge,omitempty"`
	// How many volumes the job works on at once.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=10
	// +optional
	Concurrency int `json:"concurrency,omitempty"`
	// Labels given to every snapshot and backup the job creates.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^([a-z0-9.-]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$'))",message="labels keys must be valid Kubernetes label keys"
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Parameters of the task (Longhorn v1.7): full-backup-interval, for a
	// backup job, makes every Nth run's backups full (0 or unset: none).
	// +kubebuilder:validation:MaxProperties=16
	// +optional
	Parameters map[string]string `json:"parameters,omitempty"`
	// Suspend stops new runs; runs in progress go on.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
	// TimeZone is the IANA time zone the cron expression is read in;
	// empty means UTC, never the machine's zone.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
	// StartingDeadlineSeconds, when set, bounds how late a missed tick may
	// still run; older ticks are recorded as missed and not run. At least
	// 10: Kubernetes' CronJob controller never runs a job whose deadline
	// is 0, and may miss runs under 10 s.
	// +kubebuilder:validation:Minimum=10
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`
	// SkipImmediately skips the tick that is due when the job is created or
	// resumed (suspend turned false). It is a standing choice: the manager
	// never writes it back (status.lastSkipped records each skip), so a
	// manifest applied by GitOps stays as written. Unset means the
	// daemon's --recurring-job-skip-immediately.
	// +optional
	SkipImmediately *bool `json:"skipImmediately,omitempty"`
}

// RecurringJobStatus is the observed state of a recurring job.
type RecurringJobStatus struct {
	// The node whose manager reconciles the job.
	// +optional
	OwnerID string `json:"ownerID"`
	// Ready is False, with the reason, while the spec breaks a rule the
	// apiserver cannot check (the cron expression, retain against the
	// recurring-job-max-retention setting); the job then has no CronJob.
	// +optional
	// +nullable
	Conditions []Condition `json:"conditions"`
	// LastScheduleTime is the tick of the last run started (the tick, not
	// the wall clock).
	// +optional
	// +nullable
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// LastSkipped is when a due tick was last skipped.
	// +optional
	// +nullable
	LastSkipped *metav1.Time `json:"lastSkipped,omitempty"`
	// NextScheduleTime is the next tick the job runs at; nil while the job
	// is suspended or invalid.
	// +optional
	// +nullable
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// LastSuccessfulTime is when the last run that could run finished
	// (failures of single volumes are reported by events).
	// +optional
	// +nullable
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// Active lists the runs in progress.
	// +optional
	// +listType=atomic
	Active []RecurringJobRun `json:"active,omitempty"`
	// ExecutionCount counts the runs started.
	// +optional
	ExecutionCount int64 `json:"executionCount,omitempty"`
	// ObservedSchedule is the schedule the manager last saw and since when;
	// ticks before that time belong to an older schedule and never run.
	// +optional
	ObservedSchedule *RecurringJobObservedSchedule `json:"observedSchedule,omitempty"`
	// ObservedGeneration is the generation of the spec the manager last
	// accepted. retain is checked against recurring-job-max-retention when
	// a spec is accepted: lowering the setting later does not stop a job
	// whose spec was accepted before (its Ready condition says so).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ObservedSuspend is spec.suspend as the manager last saw it; unset
	// before the manager first saw the job. Seeing the job created, or
	// resumed (true to false), is when skipImmediately skips the due tick.
	// +optional
	ObservedSuspend *bool `json:"observedSuspend,omitempty"`
}

// RecurringJobRetentionPolicy is what a snapshot or backup job keeps,
// Longhorn's values.
// +kubebuilder:validation:Enum=count-based;age-based
type RecurringJobRetentionPolicy string

const (
	// RecurringJobRetentionPolicyCountBased keeps the newest retain; the
	// policy of a job that names none.
	RecurringJobRetentionPolicyCountBased RecurringJobRetentionPolicy = "count-based"
	// RecurringJobRetentionPolicyAgeBased keeps what is younger than
	// retainAge, and the newest retain whatever their age.
	RecurringJobRetentionPolicyAgeBased RecurringJobRetentionPolicy = "age-based"
)

// RecurringJobRunner names what runs a recurring job's ticks.
// +kubebuilder:validation:Enum=cronjob;manager
type RecurringJobRunner string

const (
	// RecurringJobRunnerCronJob runs each tick in a pod of the job's CronJob.
	RecurringJobRunnerCronJob RecurringJobRunner = "cronjob"
	// RecurringJobRunnerManager runs each tick inside the manager holding
	// the runner Lease.
	RecurringJobRunnerManager RecurringJobRunner = "manager"
)

// RecurringJobRun is one run of a recurring job, identified by the job and
// its tick.
type RecurringJobRun struct {
	// ScheduledTime is the tick the run is for.
	ScheduledTime metav1.Time `json:"scheduledTime"`
	// StartTime is when the run started, when known.
	// +optional
	// +nullable
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// Runner is what runs it.
	Runner RecurringJobRunner `json:"runner"`
	// Name is the Kubernetes Job of a CronJob run, or the manager that
	// runs it.
	// +optional
	Name string `json:"name,omitempty"`
}

// RecurringJobObservedSchedule is a schedule as the manager saw it.
type RecurringJobObservedSchedule struct {
	Cron string `json:"cron"`
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
	// Since is when the manager saw this schedule replace another; nil for
	// the schedule the job was created with.
	// +optional
	// +nullable
	Since *metav1.Time `json:"since,omitempty"`
}

// RecurringJob condition reasons.
const (
	RecurringJobConditionReasonInvalidSpec = "InvalidSpec"
	RecurringJobConditionReasonScheduled   = "Scheduled"
	// RecurringJobConditionReasonRetainAboveMaximum: scheduled, but retain
	// is above a recurring-job-max-retention lowered after the spec was
	// accepted.
	RecurringJobConditionReasonRetainAboveMaximum = "RetainAboveMaximum"
	// RecurringJobConditionReasonCronJobNameTaken: not scheduled, a
	// CronJob the manager did not make has the job's name.
	RecurringJobConditionReasonCronJobNameTaken = "CronJobNameTaken"
)

// RecurringJobConditionTypeBackupTargetFound is, on a job naming a
// backup target (spec.backupTargetName), whether that BackupTarget
// exists: False (reason BackupTargetNotFound) once it was deleted after
// the job was made, when the job's runs fail for want of it. The job
// stays scheduled and its spec is left as the user wrote it. A job
// naming no target has no such condition.
const (
	RecurringJobConditionTypeBackupTargetFound      = "BackupTargetFound"
	RecurringJobConditionReasonBackupTargetFound    = "BackupTargetFound"
	RecurringJobConditionReasonBackupTargetNotFound = "BackupTargetNotFound"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lhrj,categories=longhorn
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 40",message="metadata.name must be at most 40 characters"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.name) || self.spec.name == '' || self.spec.name == self.metadata.name",message="spec.name must equal metadata.name"
// +kubebuilder:printcolumn:name="Groups",type=string,JSONPath=`.spec.groups`,description="Sets groupings to the jobs. When set to \"default\" group will be added to the volume label when no other job label exist in volume"
// +kubebuilder:printcolumn:name="Task",type=string,JSONPath=`.spec.task`,description="Should be one of \"snapshot\", \"snapshot-force-create\", \"snapshot-cleanup\", \"snapshot-delete\", \"backup\", \"backup-force-create\", \"backup-verify\", \"filesystem-trim\" or \"system-backup\""
// +kubebuilder:printcolumn:name="Cron",type=string,JSONPath=`.spec.cron`,description="The cron expression represents recurring job scheduling"
// +kubebuilder:printcolumn:name="Retain",type=integer,JSONPath=`.spec.retain`,description="The number of snapshots/backups to keep for the volume"
// +kubebuilder:printcolumn:name="Concurrency",type=integer,JSONPath=`.spec.concurrency`,description="The concurrent job to run by each cron job"
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`,description="Whether new runs are stopped"
// +kubebuilder:printcolumn:name="LastSchedule",type=date,JSONPath=`.status.lastScheduleTime`,description="The tick of the last run"
// +kubebuilder:printcolumn:name="NextSchedule",type=date,JSONPath=`.status.nextScheduleTime`,description="The next tick",priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=='Ready')].status`,description="Whether the job is valid and scheduled"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Labels",type=string,JSONPath=`.spec.labels`,description="Specify the labels"

// RecurringJob is a snapshot or backup task run on a cron schedule for the
// volumes that select it by label.
type RecurringJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec RecurringJobSpec `json:"spec"`
	// +optional
	Status RecurringJobStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// RecurringJobList is a list of RecurringJobs.
type RecurringJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RecurringJob `json:"items"`
}
