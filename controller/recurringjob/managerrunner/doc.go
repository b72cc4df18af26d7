// Package managerrunner is the manager runner (--recurring-job-runner
// manager): while this manager holds the Lease longhorn-recurring-job-runner
// it keeps the time of every RecurringJob the controller has found valid
// (it observes the job's suspend, with a skipImmediately skip, and writes
// the next tick), fires each due tick by recording it in the job's status,
// runs it in this process (jobrun.Executor, through RunFunc) and records
// its end. Under the manager runner it is the one writer of those status
// fields; the controller (the parent package) writes the rest.
package managerrunner
