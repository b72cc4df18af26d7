// Package recurringjob holds what runs recurring jobs: the controller that
// validates each RecurringJob and keeps its CronJob (cronjob*.go), and the
// runner that fires jobs inside the manager under a Lease (runner.go,
// runs.go). When a job is due is decided by the pure functions of
// schedule/.
package recurringjob
