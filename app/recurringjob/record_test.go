package recurringjob

import (
	"testing"

	"github.com/cadence-storage/longhorn-manager/types"
)

func TestChangesRecord(t *testing.T) {
	none := types.RecurringJobRunVolumes{Tick: "2026-11-22T02:00:00Z"}
	some := types.RecurringJobRunVolumes{Tick: "2026-11-22T02:00:00Z", Succeeded: 1}
	for _, c := range []struct {
		name     string
		previous string
		run      types.RecurringJobRunVolumes
		want     bool
	}{
		{"the first run, even of no volume", "", none, true},
		{"no volume after no volume", none.Format(), types.RecurringJobRunVolumes{Tick: "2026-11-22T03:00:00Z"}, false},
		{"volumes after none", none.Format(), some, true},
		{"none after volumes", some.Format(), none, true},
		{"over a hand-written value", "garbage", none, true},
	} {
		if got := changesRecord(c.previous, c.run); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
