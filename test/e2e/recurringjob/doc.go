// Package recurringjob holds the end-to-end tests of RecurringJobs: the
// CronJob runner (the longhorn-manager recurring-job command) and the manager
// runner, admission, pod settings, failed runs, full backups, and the jobs'
// metrics.
package recurringjob
