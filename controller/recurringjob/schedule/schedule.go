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
	// The zone database is in the binary: a runtime image without
	// /usr/share/zoneinfo still reads every timeZone alike.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// Schedule is a parsed cron expression in a time zone.
type Schedule struct {
	// spec is a five-field expression or a descriptor other than @every.
	spec *cron.SpecSchedule
	// every is the interval of an @every schedule, whose ticks are
	// anchor + k*every for every k >= 1, anchor in whole seconds.
	every  time.Duration
	anchor time.Time
	loc    *time.Location
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
	loc, err := LoadLocation(tz)
	if err != nil {
		return Schedule{}, err
	}
	c, err := cron.ParseStandard(trimmed)
	if err != nil {
		return Schedule{}, fmt.Errorf("cron %q: %v", expr, err)
	}
	switch c := c.(type) {
	case *cron.SpecSchedule:
		return Schedule{spec: c, loc: loc}, nil
	case cron.ConstantDelaySchedule:
		// robfig/cron makes it whole seconds, at least one.
		return Schedule{every: c.Delay, loc: loc}, nil
	}
	return Schedule{}, fmt.Errorf("cron %q: a schedule of an unknown kind (%T)", expr, c)
}

// countedFrom is the schedule with an @every interval counted from
// anchor (its fraction of a second dropped): every tick is anchor plus a
// whole number of intervals, at least one. Other schedules do not change.
// An @every schedule never given an anchor counts from the zero time.
func (s Schedule) countedFrom(anchor time.Time) Schedule {
	s.anchor = anchor.Truncate(time.Second)
	return s
}

// LoadLocation reads a job's timeZone: an IANA zone name, UTC when empty,
// never the machine's zone ("Local" is refused).
func LoadLocation(tz string) (*time.Location, error) {
	switch tz {
	case "":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf("timeZone %q is not an IANA time zone: it is the machine's", tz)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("timeZone %q is not an IANA time zone: %v", tz, err)
	}
	return loc, nil
}

// ceilSecond is the first whole second strictly after t.
func ceilSecond(t time.Time) time.Time {
	return t.Truncate(time.Second).Add(time.Second)
}

// Next is the first tick strictly after t; zero when there is none
// within ten years.
func (s Schedule) Next(t time.Time) time.Time {
	if s.every > 0 {
		step()
		return s.tick(max(s.index(t)+1, 1))
	}
	u := ceilSecond(t)
	return specNext(s.spec, s.loc, u, u.Add(searchHorizon))
}

// MostRecent is the latest tick in (after, now], or zero when there is
// none. It takes bounded time however many ticks were missed: it searches
// backwards from now over the cron fields, or divides for @every.
func (s Schedule) MostRecent(after, now time.Time) time.Time {
	if !now.After(after) {
		return time.Time{}
	}
	if s.every > 0 {
		step()
		k := s.index(now)
		if k < 1 || k <= s.index(after) {
			return time.Time{}
		}
		return s.tick(k)
	}
	u := now.Truncate(time.Second)
	floor := ceilSecond(after)
	if limit := u.Add(-searchHorizon); limit.After(floor) {
		floor = limit
	}
	return specPrev(s.spec, s.loc, u, floor)
}

// CountMissed counts the ticks in (after, now], stopping at limit, and
// looks back ten years at most.
func (s Schedule) CountMissed(after, now time.Time, limit int) int {
	if floor := now.Add(-searchHorizon); floor.After(after) {
		after = floor
	}
	if s.every > 0 {
		n := s.index(now) - max(s.index(after), 0)
		return int(min(max(n, 0), int64(limit)))
	}
	if !now.After(after) {
		return 0
	}
	return specCount(s.spec, s.loc, ceilSecond(after), now.Truncate(time.Second), limit)
}

// index is, for an @every schedule, the k of its last tick at or before
// t, anchor + k*every (zero or less before the first tick).
func (s Schedule) index(t time.Time) int64 {
	d, every := t.Unix()-s.anchor.Unix(), int64(s.every/time.Second)
	k := d / every
	if d < 0 && d%every != 0 {
		k-- // floor, not truncation
	}
	return k
}

// tick is an @every schedule's k-th tick.
func (s Schedule) tick(k int64) time.Time {
	return time.Unix(s.anchor.Unix()+k*int64(s.every/time.Second), 0).In(s.loc)
}

// testHookStep, when set (by tests), is called at each step of a tick
// search, so a test can bound the work without timing it.
var testHookStep func()

func step() {
	if testHookStep != nil {
		testHookStep()
	}
}
