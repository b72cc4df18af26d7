package types

import "testing"

func TestChangesRecord(t *testing.T) {
	none := RecurringJobRunVolumes{Tick: "2026-11-22T02:00:00Z"}
	some := RecurringJobRunVolumes{Tick: "2026-11-22T02:00:00Z", Succeeded: 1}
	for _, c := range []struct {
		name     string
		previous string
		run      RecurringJobRunVolumes
		want     bool
	}{
		{"the first run, even of no volume", "", none, true},
		{"no volume after no volume", none.Format(), RecurringJobRunVolumes{Tick: "2026-11-22T03:00:00Z"}, false},
		{"volumes after none", none.Format(), some, true},
		{"none after volumes", some.Format(), none, true},
		{"the same record again (a retried write)", some.Format(), some, false},
		{"over a hand-written value", "garbage", none, true},
	} {
		if got := c.run.ChangesRecord(c.previous); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
