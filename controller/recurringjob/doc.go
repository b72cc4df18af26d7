// Package recurringjob is the RecurringJob controller: it validates each
// job (the Ready condition), records its observed generation and
// schedule, keeps its CronJob under the CronJob runner (cronjob*.go,
// whose status it mirrors), and on deletion removes the CronJob and the
// volume labels that selected the job. The manager runner, which fires
// jobs inside the manager, is managerrunner/; when a tick is due is
// decided by the pure functions of schedule/, and jobstate/ reads a job
// as they see it.
package recurringjob
