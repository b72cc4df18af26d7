package v110to120

import (
	"testing"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestJobName(t *testing.T) {
	cases := []struct {
		name  string
		entry longhorn.VolumeRecurringJobSpec
		want  string
	}{
		// The cases pin the name format.
		{"snapshot without labels", longhorn.VolumeRecurringJobSpec{Name: "a", Task: "snapshot", Cron: "0 * * * *", Retain: 3},
			"snapshot-3-" + fnv32a("0 * * * *") + "-" + fnv32a("null")},
		{"backup with labels", longhorn.VolumeRecurringJobSpec{Name: "b", Task: "backup", Cron: "@daily", Retain: 7, Labels: map[string]string{"b": "2", "a": "1"}},
			"backup-7-" + fnv32a("@daily") + "-" + fnv32a(`{"a":"1","b":"2"}`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := JobName(c.entry)
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
	// The FNV-1a 32-bit value of a known input, so the hash itself is pinned.
	if got := fnv32a("hello"); got != "4f9f2cab" {
		t.Fatalf("fnv32a(hello) = %s, want 4f9f2cab", got)
	}
	// Entries that differ only in their old name share one job.
	a, _ := JobName(longhorn.VolumeRecurringJobSpec{Name: "x", Task: "snapshot", Cron: "@hourly", Retain: 1})
	b, _ := JobName(longhorn.VolumeRecurringJobSpec{Name: "y", Task: "snapshot", Cron: "@hourly", Retain: 1})
	if a != b {
		t.Fatalf("identical entries got %s and %s", a, b)
	}
}
