// Package schedule holds the schedule maths of recurring jobs as pure
// functions of (schedule, time zone, status, now), in the style of the
// Kubernetes CronJob controller's utils: no clients, no clock reads.
//
// An instant is a tick when its wall clock in the job's time zone matches
// the cron fields (see ticks.go), the daylight-saving policy of
// Kubernetes CronJobs: a tick inside the time skipped in spring does not
// fire that day, and a tick inside the time repeated in autumn fires at
// each of its two instants. robfig/cron v3.0.1 parses the expression;
// its own Next is not used, as it skips ticks around a half-hour shift
// (Australia/Lord_Howe) and has no backward search.
package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule is a parsed cron expression in a time zone.
type Schedule struct {
	// spec is a five-field expression or a descriptor other than @every;
	// other is an @every schedule.
	spec  *cron.SpecSchedule
	other cron.Schedule
	loc   *time.Location
}

// Parse reads a cron expression (five fields or a descriptor) for the
// IANA time zone tz; an empty zone is UTC, never the machine's zone. A
// time zone inside the expression (TZ=, CRON_TZ=) is refused: it belongs
// in the timeZone field.
func Parse(expr, tz string) (Schedule, error) {
	trimmed := strings.TrimSpace(expr)
	if strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") {
		return Schedule{}, fmt.Errorf("cron %q: set the time zone in timeZone, not in the expression", expr)
	}
	loc := time.UTC
	if tz != "" {
		var err error
		if loc, err = time.LoadLocation(tz); err != nil {
			return Schedule{}, fmt.Errorf("timeZone %q is not an IANA time zone: %v", tz, err)
		}
	}
	c, err := cron.ParseStandard(trimmed)
	if err != nil {
		return Schedule{}, fmt.Errorf("cron %q: %v", expr, err)
	}
	switch c := c.(type) {
	case *cron.SpecSchedule:
		return Schedule{spec: c, loc: loc}, nil
	}
	return Schedule{other: c, loc: loc}, nil
}

// ceilSecond is the first whole second strictly after t.
func ceilSecond(t time.Time) time.Time {
	return t.Truncate(time.Second).Add(time.Second)
}

// Next is the first tick strictly after t; zero when there is none
// within ten years.
func (s Schedule) Next(t time.Time) time.Time {
	if s.spec == nil {
		step()
		return s.other.Next(t.In(s.loc))
	}
	u := ceilSecond(t)
	return specNext(s.spec, s.loc, u, u.Add(searchHorizon))
}

// MostRecent is the latest tick in (after, now], or zero when there is
// none. It takes bounded time however many ticks were missed: it searches
// backwards from now over the cron fields.
func (s Schedule) MostRecent(after, now time.Time) time.Time {
	if !now.After(after) {
		return time.Time{}
	}
	if s.spec == nil {
		return s.intervalMostRecent(after, now)
	}
	u := now.Truncate(time.Second)
	floor := ceilSecond(after)
	if limit := u.Add(-searchHorizon); limit.After(floor) {
		floor = limit
	}
	return specPrev(s.spec, s.loc, u, floor)
}

// intervalMostRecent looks back from now in windows that double until
// one holds a tick; an interval schedule has at most two in the last.
func (s Schedule) intervalMostRecent(after, now time.Time) time.Time {
	first := s.Next(after)
	if first.IsZero() || first.After(now) {
		return time.Time{}
	}
	for w := time.Minute; ; w *= 2 {
		from := now.Add(-w)
		if from.Before(after) {
			from = after
		}
		t := s.Next(from)
		if t.IsZero() || t.After(now) {
			if from.Equal(after) {
				return time.Time{}
			}
			continue
		}
		latest := t
		for n := s.Next(t); !n.IsZero() && !n.After(now); n = s.Next(n) {
			latest = n
		}
		return latest
	}
}

// CountMissed counts the ticks in (after, now], stopping at limit, and
// looks back ten years at most.
func (s Schedule) CountMissed(after, now time.Time, limit int) int {
	if floor := now.Add(-searchHorizon); floor.After(after) {
		after = floor
	}
	n := 0
	for t := s.Next(after); !t.IsZero() && !t.After(now) && n < limit; t = s.Next(t) {
		n++
	}
	return n
}

// testHookStep, when set (by tests), is called at each step of a tick
// search, so a test can bound the work without timing it.
var testHookStep func()

func step() {
	if testHookStep != nil {
		testHookStep()
	}
}
