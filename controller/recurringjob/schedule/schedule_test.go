package schedule

import (
	"strings"
	"testing"
	"time"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func mustParse(t *testing.T, expr, tz string) Schedule {
	t.Helper()
	s, err := Parse(expr, tz)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParse(t *testing.T) {
	for _, c := range []struct{ name, expr, tz, err string }{
		{"five fields in UTC", "0 * * * *", "", ""},
		{"a descriptor in a zone", "@daily", "Europe/Paris", ""},
		{"a zone inside cron is refused", "CRON_TZ=Asia/Tokyo 0 * * * *", "", "timeZone"},
		{"TZ= inside cron is refused", "TZ=UTC 0 * * * *", "", "timeZone"},
		{"an unknown zone is refused", "0 * * * *", "Mars/Olympus", "IANA"},
		{"bad cron is refused", "every hour", "", "cron"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.expr, c.tz)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("got %v, want %q", err, c.err)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	hourly := "0 * * * *"
	cases := []struct {
		name       string
		cron, tz   string
		state      State
		now        string
		want       Action
		tick       string
		missedAtLe int // MissedTicks must be at least this
	}{
		{name: "a new job waits for its first tick", cron: hourly,
			state: State{Created: utc("2026-11-22T10:10:00Z")}, now: "2026-11-22T10:30:00Z", want: Wait},
		{name: "a new job runs at its first tick, never at creation", cron: hourly,
			state: State{Created: utc("2026-11-22T10:10:00Z")}, now: "2026-11-22T11:00:05Z", want: Run, tick: "2026-11-22T11:00:00Z"},
		{name: "after downtime only the most recent missed tick runs", cron: hourly,
			state: State{Created: utc("2026-11-01T00:00:00Z"), LastSchedule: utc("2026-11-22T05:00:00Z")}, now: "2026-11-22T09:30:00Z",
			want: Run, tick: "2026-11-22T09:00:00Z", missedAtLe: 4},
		{name: "a year of missed minutes is handled in bounded time", cron: "* * * * *",
			state: State{Created: utc("2025-11-22T00:00:00Z"), LastSchedule: utc("2025-11-22T00:00:00Z")}, now: "2026-11-22T09:30:30Z",
			want: Run, tick: "2026-11-22T09:30:00Z", missedAtLe: 100},
		{name: "a missed tick inside the starting deadline runs", cron: hourly,
			state: State{Created: utc("2026-11-22T00:00:00Z"), LastSchedule: utc("2026-11-22T08:00:00Z"), StartingDeadline: 10 * time.Minute},
			now:   "2026-11-22T09:05:00Z", want: Run, tick: "2026-11-22T09:00:00Z"},
		{name: "a missed tick past the starting deadline is recorded, not run", cron: hourly,
			state: State{Created: utc("2026-11-22T00:00:00Z"), LastSchedule: utc("2026-11-22T08:00:00Z"), StartingDeadline: 10 * time.Minute},
			now:   "2026-11-22T09:30:00Z", want: Missed, tick: "2026-11-22T09:00:00Z"},
		{name: "a suspended job runs nothing", cron: hourly,
			state: State{Created: utc("2026-11-22T00:00:00Z"), Suspend: true}, now: "2026-11-22T09:30:00Z", want: Wait},
		{name: "resuming without skip catches up the most recent tick", cron: hourly,
			state: State{Created: utc("2026-11-22T00:00:00Z"), LastSchedule: utc("2026-11-22T03:00:00Z")}, now: "2026-11-22T09:30:00Z",
			want: Run, tick: "2026-11-22T09:00:00Z"},
		{name: "resuming with skipImmediately skips the due tick", cron: hourly,
			state: State{Created: utc("2026-11-22T00:00:00Z"), LastSchedule: utc("2026-11-22T03:00:00Z"), SkipImmediately: true},
			now:   "2026-11-22T09:30:00Z", want: Skip, tick: "2026-11-22T09:00:00Z"},
		{name: "after a skip the next run is the next tick after it", cron: hourly,
			state: State{Created: utc("2026-11-22T00:00:00Z"), LastSchedule: utc("2026-11-22T03:00:00Z"), LastSkipped: utc("2026-11-22T09:30:00Z")},
			now:   "2026-11-22T09:45:00Z", want: Wait},
		{name: "Forbid: a tick due while a run is active is forbidden", cron: hourly,
			state: State{Created: utc("2026-11-22T00:00:00Z"), LastSchedule: utc("2026-11-22T08:00:00Z"), Active: true},
			now:   "2026-11-22T09:00:10Z", want: Forbidden, tick: "2026-11-22T09:00:00Z"},
		{name: "Forbid: once recorded, the forbidden tick does not run after the active run ends", cron: hourly,
			state: State{Created: utc("2026-11-22T00:00:00Z"), LastSchedule: utc("2026-11-22T08:00:00Z"), LastSkipped: utc("2026-11-22T09:00:00Z")},
			now:   "2026-11-22T09:20:00Z", want: Wait},
		{name: "Forbid: an active run with no new tick just waits", cron: hourly,
			state: State{Created: utc("2026-11-22T00:00:00Z"), LastSchedule: utc("2026-11-22T08:00:00Z"), Active: true},
			now:   "2026-11-22T08:40:00Z", want: Wait},
		{name: "a schedule change causes no immediate run", cron: "*/5 * * * *",
			state: State{Created: utc("2026-11-22T00:00:00Z"), LastSchedule: utc("2026-11-22T08:00:00Z"), ScheduleChanged: utc("2026-11-22T09:31:00Z")},
			now:   "2026-11-22T09:31:30Z", want: Wait},
		{name: "the new schedule fires at its next tick", cron: "*/5 * * * *",
			state: State{Created: utc("2026-11-22T00:00:00Z"), LastSchedule: utc("2026-11-22T08:00:00Z"), ScheduleChanged: utc("2026-11-22T09:31:00Z")},
			now:   "2026-11-22T09:35:01Z", want: Run, tick: "2026-11-22T09:35:00Z"},
		{name: "a time zone moves the tick", cron: "0 2 * * *", tz: "Europe/Paris",
			state: State{Created: utc("2026-11-21T12:00:00Z")}, now: "2026-11-22T01:00:30Z", want: Run, tick: "2026-11-22T01:00:00Z"},
		{name: "an irregular schedule is computed exactly", cron: "30 6-16/4 * * 1-5",
			state: State{Created: utc("2026-11-16T00:00:00Z")}, now: "2026-11-22T12:00:00Z", want: Run, tick: "2026-11-20T14:30:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(mustParse(t, c.cron, c.tz), c.state, utc(c.now))
			if d.Action != c.want {
				t.Fatalf("action %v, want %v (%+v)", d.Action, c.want, d)
			}
			if c.tick != "" && !d.Tick.Equal(utc(c.tick)) {
				t.Fatalf("tick %s, want %s", d.Tick.UTC().Format(time.RFC3339), c.tick)
			}
			if d.MissedTicks < c.missedAtLe {
				t.Fatalf("%d missed ticks counted, want at least %d", d.MissedTicks, c.missedAtLe)
			}
			if d.Requeue <= 0 {
				t.Fatalf("requeue %s is not positive", d.Requeue)
			}
		})
	}
}

// Daylight saving, the policy of robfig/cron and Kubernetes CronJobs: a
// tick in the skipped spring hour does not fire that day; a tick in the
// repeated autumn hour fires at both of its instants.
func TestDaylightSaving(t *testing.T) {
	s := mustParse(t, "30 2 * * *", "America/New_York")
	// 2026-03-08 02:00 local does not exist: the next 02:30 is on March 9.
	next := s.Next(utc("2026-03-08T05:00:00Z")) // 00:00 local
	if want := utc("2026-03-09T06:30:00Z"); !next.Equal(want) {
		t.Fatalf("spring: next %s, want %s", next.UTC(), want)
	}
	autumn := mustParse(t, "30 1 * * *", "America/New_York")
	first := autumn.Next(utc("2026-11-01T04:00:00Z")) // 00:00 EDT
	second := autumn.Next(first)
	if !first.Equal(utc("2026-11-01T05:30:00Z")) {
		t.Fatalf("autumn: first %s", first.UTC())
	}
	if !second.Equal(utc("2026-11-01T06:30:00Z")) {
		t.Fatalf("autumn: the repeated 01:30 fires again at %s, want 06:30 UTC the same day", second.UTC())
	}
}

// An @every schedule's ticks are counted from the job's creation, or
// from the last change of its schedule: every tick is that time plus a
// whole number of intervals, whatever ran, was skipped or was missed.
func TestEveryCountsFromCreation(t *testing.T) {
	hourly := mustParse(t, "@every 1h", "")
	created := utc("2026-11-22T08:59:00Z")
	for _, c := range []struct {
		name     string
		state    State
		now      string
		want     Action
		tick     string
		missed   int
		nextTick string
	}{
		{name: "the first tick is an interval after creation", state: State{Created: created},
			now: "2026-11-22T09:30:00Z", want: Wait, nextTick: "2026-11-22T09:59:00Z"},
		{name: "after downtime the latest tick runs, not one an interval before now", state: State{Created: created},
			now: "2026-11-22T12:00:00Z", want: Run, tick: "2026-11-22T11:59:00Z", missed: 3, nextTick: "2026-11-22T12:59:00Z"},
		{name: "the next tick is an interval after the last, not after now", state: State{Created: created, LastSchedule: utc("2026-11-22T09:59:00Z")},
			now: "2026-11-22T10:00:00Z", want: Wait, nextTick: "2026-11-22T10:59:00Z"},
		{name: "a late run does not move the ticks", state: State{Created: created, LastSchedule: utc("2026-11-22T09:59:00Z")},
			now: "2026-11-22T10:59:40Z", want: Run, tick: "2026-11-22T10:59:00Z", missed: 1, nextTick: "2026-11-22T11:59:00Z"},
		{name: "a skip does not move the ticks", state: State{Created: created, LastSkipped: utc("2026-11-22T10:20:00Z")},
			now: "2026-11-22T10:30:00Z", want: Wait, nextTick: "2026-11-22T10:59:00Z"},
		{name: "a changed schedule counts from its change", state: State{Created: created, LastSchedule: utc("2026-11-22T09:59:00Z"), ScheduleChanged: utc("2026-11-22T10:17:05Z")},
			now: "2026-11-22T10:30:00Z", want: Wait, nextTick: "2026-11-22T11:17:05Z"},
		{name: "and fires then", state: State{Created: created, LastSchedule: utc("2026-11-22T09:59:00Z"), ScheduleChanged: utc("2026-11-22T10:17:05Z")},
			now: "2026-11-22T11:17:06Z", want: Run, tick: "2026-11-22T11:17:05Z", missed: 1, nextTick: "2026-11-22T12:17:05Z"},
		{name: "the anchor's fraction of a second is dropped, as in a stored timestamp", state: State{Created: created.Add(400 * time.Millisecond)},
			now: "2026-11-22T09:59:00Z", want: Run, tick: "2026-11-22T09:59:00Z", missed: 1, nextTick: "2026-11-22T10:59:00Z"},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := utc(c.now)
			d := Decide(hourly, c.state, now)
			if d.Action != c.want || c.tick != "" && !d.Tick.Equal(utc(c.tick)) || d.MissedTicks != c.missed {
				t.Fatalf("%v of %s (%d missed), want %v of %s (%d missed)", d.Action, d.Tick.UTC().Format(time.RFC3339), d.MissedTicks, c.want, c.tick, c.missed)
			}
			// The requeue, the next tick in the status and the next
			// decision agree.
			after := c.state
			if d.Action == Run {
				after.LastSchedule = d.Tick
			}
			next := NextTick(hourly, after, now)
			if !next.Equal(utc(c.nextTick)) {
				t.Fatalf("next tick %s, want %s", next.UTC().Format(time.RFC3339), c.nextTick)
			}
			if d.Requeue != next.Sub(now)+requeueSlack {
				t.Fatalf("requeue %s, want %s", d.Requeue, next.Sub(now)+requeueSlack)
			}
			if then := Decide(hourly, after, next); then.Action != Run || !then.Tick.Equal(next) {
				t.Fatalf("at the next tick: %v of %s", then.Action, then.Tick.UTC())
			}
			if before := Decide(hourly, after, next.Add(-time.Second)); before.Action != Wait {
				t.Fatalf("a second before the next tick: %v of %s", before.Action, before.Tick.UTC())
			}
		})
	}
}

// A half-hour daylight-saving shift (Australia/Lord_Howe: +11 to +10:30
// on the first Sunday of April at 02:00, back on the first Sunday of
// October) moves no tick: robfig/cron v3.0.1 skipped the @weekly tick of
// 2027-04-11, so after the run of 04-04 the requeue was two weeks.
func TestHalfHourDaylightSaving(t *testing.T) {
	weekly := mustParse(t, "@weekly", "Australia/Lord_Howe")
	run := utc("2027-04-03T13:00:00Z")  // Sunday 2027-04-04 00:00 +11
	want := utc("2027-04-10T13:30:00Z") // Sunday 2027-04-11 00:00 +10:30
	if next := weekly.Next(run); !next.Equal(want) {
		t.Fatalf("next after %s is %s, want %s", run, next.UTC(), want)
	}
	st := State{Created: utc("2027-03-01T00:00:00Z"), LastSchedule: run}
	now := utc("2027-04-04T01:00:00Z")
	if d := Decide(weekly, st, now); d.Action != Wait || d.Requeue != want.Sub(now)+requeueSlack {
		t.Fatalf("after the run of 04-04: %+v, want a wait until %s", d, want)
	}
	if d := Decide(weekly, st, want.Add(5*time.Second)); d.Action != Run || !d.Tick.Equal(want) {
		t.Fatalf("on 04-11: %+v, want the run of %s", d, want)
	}
	// The repeated half hour of April fires twice; the skipped half hour
	// of October not at all.
	autumn := mustParse(t, "45 1 * * *", "Australia/Lord_Howe")
	first := autumn.Next(utc("2027-04-03T13:00:00Z"))
	if second := autumn.Next(first); !first.Equal(utc("2027-04-03T14:45:00Z")) || !second.Equal(utc("2027-04-03T15:15:00Z")) {
		t.Fatalf("the repeated 01:45 fires at %s and %s", first.UTC(), second.UTC())
	}
	spring := mustParse(t, "15 2 * * *", "Australia/Lord_Howe")
	if next := spring.Next(utc("2027-10-02T13:30:00Z")); !next.Equal(utc("2027-10-03T15:15:00Z")) {
		t.Fatalf("the skipped 02:15 of 2027-10-03 fires at %s, want the next day's", next.UTC())
	}
}

// maxDecideSteps bounds the search steps of one Decide (a Next call, a
// zone period, a month or a day visited).
const maxDecideSteps = 1000

// Decide does bounded work on every schedule, the worst ones included:
// the test counts search steps, never time.
func TestDecideDoesBoundedWork(t *testing.T) {
	steps := 0
	testHookStep = func() { steps++ }
	defer func() { testHookStep = nil }()
	for _, c := range worstSchedules {
		s := mustParse(t, c.cron, c.tz)
		steps = 0
		Decide(s, State{Created: utc(c.after), LastSchedule: utc(c.after)}, utc(c.now))
		if steps > maxDecideSteps {
			t.Errorf("%s: %d search steps, want at most %d", c.name, steps, maxDecideSteps)
		}
	}
}

// worstSchedules are the costliest schedules found for MostRecent and
// Decide: a dense schedule whose last tick is half a year back (the old
// search walked every minute of its last window), sparse ones whose ticks
// are years apart, in zones with daylight saving, and a year of missed
// minutes.
var worstSchedules = []struct {
	name, cron, tz string
	after, now     string
}{
	{"a year of missed minutes", "* * * * *", "", "2025-11-22T00:00:00Z", "2026-11-22T09:30:30Z"},
	{"every minute of January to June, on 31 December", "* * * 1-6 *", "", "2026-01-01T00:00:00Z", "2026-12-31T12:00:00Z"},
	{"the same in Europe/Paris", "* * * 1-6 *", "Europe/Paris", "2026-01-01T00:00:00Z", "2026-12-31T12:00:00Z"},
	{"every minute of the 1st to 15th, on the 31st", "* * 1-15 * *", "", "2026-12-01T00:00:00Z", "2026-12-31T12:00:00Z"},
	{"weekdays of January, on 31 December", "* * * 1 1-5", "America/New_York", "2026-01-01T00:00:00Z", "2026-12-31T12:00:00Z"},
	{"29 February, seven years back", "0 0 29 2 *", "Europe/Paris", "2090-01-01T00:00:00Z", "2103-02-28T00:00:00Z"},
	{"29 February in Casablanca (four offset changes a year), since 1990", "0 0 29 2 *", "Africa/Casablanca", "1990-01-01T00:00:00Z", "2032-02-28T00:00:00Z"},
	{"once a year, a year back", "59 23 31 12 *", "Australia/Lord_Howe", "2020-01-01T00:00:00Z", "2026-12-31T12:00:00Z"},
	{"weekly across a half-hour daylight-saving shift", "@weekly", "Australia/Lord_Howe", "2027-04-03T13:00:00Z", "2027-04-10T14:00:00Z"},
	{"an interval, a year of missed ticks", "@every 1m", "", "2025-11-22T00:00:00Z", "2026-11-22T09:30:30Z"},
}

// BenchmarkMostRecent and BenchmarkDecide give the figures in docs/benchmarks.md.
// They assert nothing about time (the machine varies).
func BenchmarkMostRecent(b *testing.B) {
	for _, c := range worstSchedules {
		b.Run(c.name, func(b *testing.B) {
			s, err := Parse(c.cron, c.tz)
			if err != nil {
				b.Fatal(err)
			}
			after, now := utc(c.after), utc(c.now)
			for i := 0; i < b.N; i++ {
				s.MostRecent(after, now)
			}
		})
	}
}

func BenchmarkDecide(b *testing.B) {
	for _, c := range worstSchedules {
		b.Run(c.name, func(b *testing.B) {
			s, err := Parse(c.cron, c.tz)
			if err != nil {
				b.Fatal(err)
			}
			st := State{Created: utc(c.after), LastSchedule: utc(c.after)}
			now := utc(c.now)
			for i := 0; i < b.N; i++ {
				Decide(s, st, now)
			}
		})
	}
}
