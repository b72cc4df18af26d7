package jobrun

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/client"
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

// TestASystemBackupJobKeepsItsRetainOfGoodSystemBackups: retention
// counts Ready system backups only, so a run of failures never deletes
// the good ones a restore needs; failed ones are kept while they are
// the newest few (they say why the runs fail), and go once older than
// the oldest good one kept or beyond the newest retain failures.
func TestASystemBackupJobKeepsItsRetainOfGoodSystemBackups(t *testing.T) {
	const job = "nightly"
	sb := func(day int, state string) client.SystemBackup {
		return client.SystemBackup{Name: fmt.Sprintf("%s-202611%02dt010000z", job, day), State: state}
	}
	name := func(day int) string { return fmt.Sprintf("%s-202611%02dt010000z", job, day) }
	const ready, failed = "Ready", "Error"
	for _, tc := range []struct {
		name   string
		retain int
		list   []client.SystemBackup
		want   []string
	}{
		{"the newest retain Ready are kept", 2, []client.SystemBackup{sb(1, ready), sb(2, ready), sb(3, ready)}, []string{name(1)}},
		{"retain 0 keeps one", 0, []client.SystemBackup{sb(1, ready), sb(2, ready)}, []string{name(1)}},
		{"failed runs since do not push the good ones out", 2,
			[]client.SystemBackup{sb(1, ready), sb(2, ready), sb(3, failed), sb(4, failed)}, nil},
		{"failed runs beyond the newest retain failures go", 2,
			[]client.SystemBackup{sb(1, ready), sb(2, ready), sb(3, failed), sb(4, failed), sb(5, failed)}, []string{name(3)}},
		{"a failed run older than the oldest good one kept goes", 1,
			[]client.SystemBackup{sb(1, failed), sb(2, ready), sb(3, ready)}, []string{name(2), name(1)}},
		{"a failed run between good ones kept stays", 2,
			[]client.SystemBackup{sb(1, ready), sb(2, failed), sb(3, ready)}, nil},
		{"only failures: the newest retain stay", 1,
			[]client.SystemBackup{sb(1, failed), sb(2, failed)}, []string{name(1)}},
		{"those being made are neither counted nor deleted", 1,
			[]client.SystemBackup{sb(1, ready), sb(2, "Uploading"), sb(3, ready)}, []string{name(1)}},
		{"another job's and a user's are not the job's", 1,
			[]client.SystemBackup{sb(1, ready), {Name: "nightly-eu-20261102t010000z", State: ready}, {Name: "before-upgrade", State: ready}, sb(3, ready)}, []string{name(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := expiredSystemBackups(job, tc.retain, tc.list); !slices.Equal(got, tc.want) {
				t.Errorf("expiredSystemBackups = %v, want %v", got, tc.want)
			}
		})
	}
}
