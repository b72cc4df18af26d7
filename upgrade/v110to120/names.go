// Package v110to120 turns Longhorn v1.1's per-volume recurring jobs (the
// volume's spec.recurringJobs and the StorageClass recurringJobs
// parameter) into RecurringJob resources selected by volume labels, and
// deletes the per-volume CronJobs of the old model.
package v110to120

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// DefaultConcurrency is what every migrated job gets.
const DefaultConcurrency = 10

// JobName names the RecurringJob of an old entry as Longhorn does:
// <task>-<retain>-<fnv32a(cron)>-<fnv32a(JSON of labels)>, so identical
// entries on many volumes share one job.
func JobName(entry longhorn.VolumeRecurringJobSpec) (string, error) {
	labels, err := json.Marshal(entry.Labels)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%d-%s-%s", entry.Task, entry.Retain, fnv32a(entry.Cron), fnv32a(string(labels))), nil
}

func fnv32a(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%x", h.Sum32())
}

// recurringJob is the RecurringJob an old entry becomes.
func recurringJob(entry longhorn.VolumeRecurringJobSpec) (*longhorn.RecurringJob, error) {
	name, err := JobName(entry)
	if err != nil {
		return nil, err
	}
	job := &longhorn.RecurringJob{}
	job.Name = name
	job.Spec = longhorn.RecurringJobSpec{
		Name:        name,
		Task:        longhorn.RecurringJobType(entry.Task),
		Cron:        entry.Cron,
		Retain:      entry.Retain,
		Concurrency: DefaultConcurrency,
		Labels:      entry.Labels,
	}
	return job, nil
}
