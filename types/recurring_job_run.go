package types

import (
	"encoding/json"
	"time"
)

// AnnotationRecurringJobLastRun on a RecurringJob holds what its last run
// did to its volumes, as JSON (RecurringJobRunVolumes). The run writes it,
// a CronJob pod or the manager runner alike, so the metrics know the
// volumes of a run in both modes.
const AnnotationRecurringJobLastRun = "recurring-job.longhorn.io/last-run"

// RecurringJobRunVolumes counts the volumes of one run of a job.
type RecurringJobRunVolumes struct {
	// Tick is the schedule time the run was for, RFC 3339.
	Tick      string `json:"tick"`
	Succeeded int    `json:"succeeded"`
	Failed    int    `json:"failed"`
	Skipped   int    `json:"skipped"`
}

// Format is the annotation's value.
func (v RecurringJobRunVolumes) Format() string {
	raw, _ := json.Marshal(v)
	return string(raw)
}

// ParseRecurringJobLastRun reads the annotation's value; false when it is
// absent or not one a run wrote (a hand edit), so it is ignored.
func ParseRecurringJobLastRun(value string) (RecurringJobRunVolumes, bool) {
	var v RecurringJobRunVolumes
	if value == "" || json.Unmarshal([]byte(value), &v) != nil {
		return RecurringJobRunVolumes{}, false
	}
	if _, err := time.Parse(time.RFC3339, v.Tick); err != nil || v.Succeeded < 0 || v.Failed < 0 || v.Skipped < 0 {
		return RecurringJobRunVolumes{}, false
	}
	return v, true
}

// ChangesRecord tells whether the run is worth writing over the
// annotation's previous value: anything but the same record again (a
// retried write) or a run of no volume over another of none (nothing new
// to count: a job selecting no volume costs no write a tick).
func (v RecurringJobRunVolumes) ChangesRecord(previous string) bool {
	if previous == v.Format() {
		return false
	}
	prev, ok := ParseRecurringJobLastRun(previous)
	empty := func(r RecurringJobRunVolumes) bool { return r.Succeeded == 0 && r.Failed == 0 && r.Skipped == 0 }
	return !ok || !empty(prev) || !empty(v)
}
