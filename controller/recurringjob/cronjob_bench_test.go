package recurringjob

import "testing"

// The controller builds and compares the desired CronJob on every sync of
// every job, including the re-enqueue of all jobs on a settings change.
func BenchmarkDesiredAndMergeCronJob(b *testing.B) {
	live := asStored(desiredCronJob(testJob(), testCronJobConfig, cronJobSettings{SuccessfulHistory: 1, FailedHistory: 1}))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		desired := desiredCronJob(testJob(), testCronJobConfig, cronJobSettings{SuccessfulHistory: 1, FailedHistory: 1})
		if _, changed := mergeCronJob(live, desired); changed {
			b.Fatal("unexpected change")
		}
	}
}
