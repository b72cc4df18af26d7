package jobrun

import (
	"testing"
	"time"
)

func TestASystemBackupJobKnowsItsOwnSystemBackupsByName(t *testing.T) {
	tick := time.Date(2026, 11, 23, 1, 0, 0, 0, time.FixedZone("CET", 3600))
	name := systemBackupName("nightly", tick)
	if name != "nightly-20261123t000000z" {
		t.Fatalf("systemBackupName = %q, want the job and the tick in UTC, lower case", name)
	}
	for _, tc := range []struct {
		job, name string
		own       bool
	}{
		{"nightly", name, true},
		{"nightly", "nightly-20261124t000000z", true},
		// Another job whose name starts with this one's, and its runs.
		{"nightly", "nightly-eu-20261123t000000z", false},
		{"nightly-eu", "nightly-eu-20261123t000000z", true},
		// A system backup a user named.
		{"nightly", "nightly-before-upgrade", false},
		{"nightly", "nightly", false},
	} {
		if got := ownSystemBackup(tc.job, tc.name); got != tc.own {
			t.Errorf("ownSystemBackup(%q, %q) = %v, want %v", tc.job, tc.name, got, tc.own)
		}
	}
}
