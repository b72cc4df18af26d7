package app

import (
	"strings"
	"testing"
	"time"
)

func TestScheduleTick(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 34, 56, 0, time.UTC)
	cases := []struct{ name, flag, job, want string }{
		{"the flag wins", "2026-11-22T02:00:00Z", "snap-29000000", "2026-11-22T02:00:00Z"},
		{"the Job name carries minutes since the epoch", "", "snap-29399520", time.Unix(29399520*60, 0).UTC().Format(time.RFC3339)},
		{"without either, the current minute", "", "", "2026-11-22T12:34:00Z"},
		{"a Job name without a tick falls back", "", "manual-run", "2026-11-22T12:34:00Z"},
		{"a Job of another CronJob falls back", "", "other-29399520", "2026-11-22T12:34:00Z"},
		{"a Job made by hand with a small number falls back", "", "snap-1", "2026-11-22T12:34:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := scheduleTick(c.flag, "snap", c.job, now)
			if err != nil || got.Format(time.RFC3339) != c.want {
				t.Fatalf("got %v, %v; want %s", got, err, c.want)
			}
		})
	}
	if _, err := scheduleTick("yesterday", "snap", "", now); err == nil || !strings.Contains(err.Error(), "--tick") {
		t.Fatalf("a bad --tick: %v", err)
	}
}
