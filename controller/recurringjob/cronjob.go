package recurringjob

import (
	"time"

	"encoding/json"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls"
	"github.com/cadence-storage/longhorn-manager/types"
)

const (
	// recurringJobBackoffLimit lets a run that crashed as a whole retry
	// once; failures of single volumes are handled inside the run, so a
	// retry never repeats volumes that succeeded because one failed.
	recurringJobBackoffLimit = 1
	// cronJobTimeZone is the zone of jobs without one: UTC, never the
	// zone the controller manager happens to have.
	cronJobTimeZone = "Etc/UTC"
)

// CronJobConfig is what the daemon knows about the pods that run jobs.
type CronJobConfig struct {
	// ManagerImage is the image of the pods; it has longhorn-manager.
	ManagerImage string
	// ServiceAccount is the pods' service account.
	ServiceAccount string
	// ManagerURL is the manager API the pods call.
	ManagerURL string
	// SkipImmediatelyDefault is skipImmediately for jobs that do not set
	// it (--recurring-job-skip-immediately), under the CronJob runner; the
	// manager runner is given the same (managerrunner.Config).
	SkipImmediatelyDefault bool
	// Runner is what fires jobs (--recurring-job-runner): a CronJob per job,
	// or the manager holding the runner Lease. Empty means cronjob.
	Runner longhorn.RecurringJobRunner
	// ResyncPeriod is how often the jobs that are not settled are
	// queued again (resync.go); 30 s when zero.
	ResyncPeriod time.Duration
	// APITokenAudience, when set, is the audience the manager's API
	// accepts (--api-token-audience): the pods get a ServiceAccount token
	// projected with it (types.APITokenPath) and send that one.
	APITokenAudience string
}

// ManagerRuns reports whether the manager runner fires jobs.
func (c CronJobConfig) ManagerRuns() bool { return c.Runner == longhorn.RecurringJobRunnerManager }

// cronJobLabels are the labels of a job's CronJob and of its pods.
func cronJobLabels(job string) map[string]string {
	return map[string]string{
		types.RecurringJobLabel: job,
		types.LabelManagedBy:    types.ManagedByValue,
	}
}

// cronJobSettings is what the settings say about every job's CronJob.
type cronJobSettings struct {
	// SuccessfulHistory and FailedHistory are the CronJob's history limits.
	SuccessfulHistory, FailedHistory int32
	// Placement is the pods' tolerations, node selector, priority class
	// and image pull secret.
	Placement types.PodPlacement
}

// desiredCronJob is the CronJob that runs job: named after it, owned by it,
// running `longhorn-manager -d recurring-job <name> --manager-url <url>`.
func desiredCronJob(job *longhorn.RecurringJob, cfg CronJobConfig, set cronJobSettings) *batchv1.CronJob {
	spec, _ := json.Marshal(job.Spec)
	zone := job.Spec.TimeZone
	if zone == "" {
		zone = cronJobTimeZone
	}
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{
			Name:        job.Name,
			Namespace:   job.Namespace,
			Labels:      cronJobLabels(job.Name),
			Annotations: map[string]string{types.AnnotationRecurringJobSpec: string(spec)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         longhorn.SchemeGroupVersion.String(),
				Kind:               "RecurringJob",
				Name:               job.Name,
				UID:                job.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: batchv1.CronJobSpec{
			// Validation trims the expression; the apiserver does not.
			Schedule:                   strings.TrimSpace(job.Spec.Cron),
			TimeZone:                   ptr.To(zone),
			ConcurrencyPolicy:          batchv1.ForbidConcurrent,
			Suspend:                    ptr.To(job.Spec.Suspend),
			StartingDeadlineSeconds:    job.Spec.StartingDeadlineSeconds,
			SuccessfulJobsHistoryLimit: ptr.To(set.SuccessfulHistory),
			FailedJobsHistoryLimit:     ptr.To(set.FailedHistory),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: cronJobLabels(job.Name)},
				Spec: batchv1.JobSpec{
					BackoffLimit: ptr.To(int32(recurringJobBackoffLimit)),
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: cronJobLabels(job.Name)},
						Spec: corev1.PodSpec{
							RestartPolicy:      corev1.RestartPolicyOnFailure,
							ServiceAccountName: cfg.ServiceAccount,
							Containers:         []corev1.Container{recurringJobContainer(job.Name, cfg)},
							Volumes:            append(apiTokenVolumes(cfg), managerCAVolumes(cfg)...),
							Tolerations:        set.Placement.Tolerations,
							NodeSelector:       set.Placement.NodeSelector,
							PriorityClassName:  set.Placement.PriorityClassName,
							ImagePullSecrets:   set.Placement.ImagePullSecrets(),
						},
					},
				},
			},
		},
	}
}

// apiTokenVolumes is the projected token of the API's audience, when the
// API asks for one. The fields the apiserver would default are set, so the
// live object equals the desired one.
func apiTokenVolumes(cfg CronJobConfig) []corev1.Volume {
	if cfg.APITokenAudience == "" {
		return nil
	}
	return []corev1.Volume{{
		Name: types.APITokenVolume,
		VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To(int32(0o644)),
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: cfg.APITokenAudience, ExpirationSeconds: ptr.To(int64(types.APITokenExpirationSeconds)), Path: types.APITokenFile,
			}}},
		}},
	}}
}

// managerCAVolumes is the ConfigMap of the internal CA's certificates,
// when the pods call the API over TLS (an https:// ManagerURL): they check
// the API's certificate with it.
func managerCAVolumes(cfg CronJobConfig) []corev1.Volume {
	if !strings.HasPrefix(cfg.ManagerURL, "https://") {
		return nil
	}
	return []corev1.Volume{{
		Name: types.ManagerCAVolume,
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: mtls.CAConfigMapName},
			DefaultMode:          ptr.To(int32(0o644)),
			// A missing ConfigMap is the run's error, naming the file,
			// rather than a pod that never starts.
			Optional: ptr.To(true),
		}},
	}}
}

func recurringJobContainer(job string, cfg CronJobConfig) corev1.Container {
	command := []string{"longhorn-manager", "-d", "recurring-job", job, "--manager-url", cfg.ManagerURL}
	var mounts []corev1.VolumeMount
	if cfg.APITokenAudience != "" {
		command = append(command, "--api-token-file", types.APITokenPath)
		mounts = []corev1.VolumeMount{{Name: types.APITokenVolume, MountPath: types.APITokenDir, ReadOnly: true}}
	}
	if len(managerCAVolumes(cfg)) > 0 {
		command = append(command, "--manager-ca-file", types.ManagerCAPath)
		mounts = append(mounts, corev1.VolumeMount{Name: types.ManagerCAVolume, MountPath: types.ManagerCADir, ReadOnly: true})
	}
	return corev1.Container{
		Name:            "recurring-job",
		Image:           cfg.ManagerImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         command,
		VolumeMounts:    mounts,
		// APIVersion is what the apiserver would default it to; setting it
		// keeps the live object equal to the desired one.
		Env: []corev1.EnvVar{{
			Name:      "POD_NAMESPACE",
			ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}},
		}, {
			// The Job's name carries the schedule tick, which makes a retried
			// run for the same tick create nothing twice.
			Name:      "JOB_NAME",
			ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['batch.kubernetes.io/job-name']"}},
		}},
	}
}

// mergeCronJob returns live with every field the manager owns set as in
// desired, and whether that changed anything. Fields the apiserver
// defaults and the manager does not care about keep their live values, so
// an unchanged job causes no write while a manual edit of an owned field
// is reverted.
func mergeCronJob(live, desired *batchv1.CronJob) (*batchv1.CronJob, bool) {
	out := live.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for k, v := range desired.Labels {
		out.Labels[k] = v
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	for k, v := range desired.Annotations {
		out.Annotations[k] = v
	}
	out.OwnerReferences = desired.OwnerReferences

	s, d := &out.Spec, &desired.Spec
	s.Schedule = d.Schedule
	s.TimeZone = d.TimeZone
	s.ConcurrencyPolicy = d.ConcurrencyPolicy
	s.Suspend = d.Suspend
	s.StartingDeadlineSeconds = d.StartingDeadlineSeconds
	s.SuccessfulJobsHistoryLimit = d.SuccessfulJobsHistoryLimit
	s.FailedJobsHistoryLimit = d.FailedJobsHistoryLimit
	s.JobTemplate.Labels = d.JobTemplate.Labels
	s.JobTemplate.Spec.BackoffLimit = d.JobTemplate.Spec.BackoffLimit

	pod, dpod := &s.JobTemplate.Spec.Template, &d.JobTemplate.Spec.Template
	pod.Labels = dpod.Labels
	pod.Spec.RestartPolicy = dpod.Spec.RestartPolicy
	pod.Spec.ServiceAccountName = dpod.Spec.ServiceAccountName
	pod.Spec.Tolerations = dpod.Spec.Tolerations
	pod.Spec.NodeSelector = dpod.Spec.NodeSelector
	pod.Spec.PriorityClassName = dpod.Spec.PriorityClassName
	pod.Spec.ImagePullSecrets = dpod.Spec.ImagePullSecrets
	pod.Spec.Volumes = dpod.Spec.Volumes
	if pod.Spec.DeprecatedServiceAccount != "" {
		pod.Spec.DeprecatedServiceAccount = dpod.Spec.ServiceAccountName
	}
	if len(pod.Spec.Containers) != 1 {
		pod.Spec.Containers = dpod.Spec.Containers
	} else {
		c, dc := &pod.Spec.Containers[0], &dpod.Spec.Containers[0]
		c.Name, c.Image, c.ImagePullPolicy = dc.Name, dc.Image, dc.ImagePullPolicy
		c.Command, c.Args, c.Env, c.VolumeMounts = dc.Command, dc.Args, dc.Env, dc.VolumeMounts
	}
	changed := !equality.Semantic.DeepEqual(out.ObjectMeta, live.ObjectMeta) || !equality.Semantic.DeepEqual(out.Spec, live.Spec)
	return out, changed
}
