package schedule

import (
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// wall is an instant and its wall clock.
type wall struct {
	at                         time.Time
	month, day, hour, min, sec int
	weekday                    time.Weekday
}

func wallOf(t time.Time, loc *time.Location) wall {
	w := t.In(loc)
	_, month, day := w.Date()
	return wall{at: t, month: int(month), day: day, hour: w.Hour(), min: w.Minute(), sec: w.Second(), weekday: w.Weekday()}
}

// matches is the definition of a tick, read as plainly as possible: the
// wall clock matches every field (the days as robfig/cron's dayMatches
// reads them).
func matches(sp *cron.SpecSchedule, w wall) bool {
	bit := func(mask uint64, v int) bool { return mask&(1<<uint(v)) != 0 }
	dom, dow := bit(sp.Dom, w.day), bit(sp.Dow, int(w.weekday))
	day := dom || dow
	if sp.Dom&starBit != 0 || sp.Dow&starBit != 0 {
		day = dom && dow
	}
	return day && bit(sp.Month, w.month) && bit(sp.Hour, w.hour) && bit(sp.Minute, w.min) && bit(sp.Second, w.sec)
}

var oracleSchedules = []string{
	"* * * * *", "0 * * * *", "30 2 * * *", "45 1 * * *", "*/20 0-3 * * *", "@daily", "@weekly",
	"0 0 31 12 *", "59 23 * * *", "15,45 1-3 * * 0,6", "0 0 * * 1-5", "0 0 1,15 * 3", "30 0 29 2 *",
}

var oracleZones = []string{
	"UTC", "America/New_York", "Europe/Paris", "Australia/Sydney",
	"Australia/Lord_Howe",             // a half-hour shift
	"Pacific/Chatham",                 // +12:45 and +13:45
	"Antarctica/Troll",                // a two-hour shift
	"America/Sao_Paulo",               // midnight skipped (to 2018) and repeated
	"America/Santiago",                // shifts at midnight
	"Asia/Kathmandu", "Europe/Warsaw", // +05:45; Warsaw for golang/go#81583
}

// oracleWindows are the days around each zone's offset changes of 2018,
// 2026 and 2027, the end of 2028 (a leap year, golang/go#81583) and the
// end of 2040.
func oracleWindows(t *testing.T, loc *time.Location) [][2]time.Time {
	var ws [][2]time.Time
	for _, from := range []time.Time{utc("2018-01-01T00:00:00Z"), utc("2026-01-01T00:00:00Z")} {
		u := from
		for i := 0; i < 4; i++ {
			_, end := u.In(loc).ZoneBounds()
			if end.IsZero() {
				break
			}
			ws = append(ws, [2]time.Time{end.Add(-36 * time.Hour), end.Add(36 * time.Hour)})
			u = end
		}
	}
	for _, at := range []string{"2028-12-31T00:00:00Z", "2040-12-31T00:00:00Z"} {
		ws = append(ws, [2]time.Time{utc(at).Add(-36 * time.Hour), utc(at).Add(48 * time.Hour)})
	}
	return ws
}

// Next, MostRecent and CountMissed agree with the definition of a tick,
// minute by minute, across offset changes of every kind. The machine's
// zoneinfo lists transitions to 2037; TestZonesWithoutSystemZoneinfo runs
// this again on the embedded database, which lists fewer and leaves the
// rest to each zone's TZ rule (and golang/go#81583).
func TestTicksMatchTheirDefinition(t *testing.T) {
	checkTicksMatchTheirDefinition(t)
}

func checkTicksMatchTheirDefinition(t *testing.T) {
	// A search that does not end fails here, not at the test timeout.
	steps := 0
	testHookStep = func() {
		if steps++; steps > 100000 {
			panic("a tick search did not end")
		}
	}
	defer func() { testHookStep = nil }()
	rng := rand.New(rand.NewSource(1))
	for _, zone := range oracleZones {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range oracleWindows(t, loc) {
			// Every zone here has whole-minute offsets, so every tick is a
			// whole minute in UTC.
			var minutes []wall
			for m := w[0].Truncate(time.Minute); m.Before(w[1]); m = m.Add(time.Minute) {
				minutes = append(minutes, wallOf(m, loc))
			}
			for _, expr := range oracleSchedules {
				s := mustParse(t, expr, zone)
				var ticks []time.Time
				for _, m := range minutes {
					if matches(s.spec, m) {
						ticks = append(ticks, m.at)
					}
				}
				// Points to look from: a tick, the second before, a
				// random instant; inside the window, leaving room on both
				// sides for the answer.
				lo, hi := w[0].Add(12*time.Hour), w[1].Add(-12*time.Hour)
				for at := lo; at.Before(hi); at = at.Add(time.Duration(rng.Intn(3000)+1) * time.Second) {
					for _, x := range []time.Time{at, at.Add(-time.Second), at.Add(time.Duration(rng.Intn(1e9)))} {
						steps = 0
						var wantNext, wantPrev time.Time
						i := sort.Search(len(ticks), func(i int) bool { return ticks[i].After(x) })
						if i < len(ticks) {
							wantNext = ticks[i]
						}
						if i > 0 && ticks[i-1].After(w[0]) {
							wantPrev = ticks[i-1]
						}
						if wantNext.IsZero() || wantNext.After(w[1].Add(-time.Hour)) {
							wantNext = time.Time{} // beyond the window: not checked
						}
						if got := s.Next(x); !wantNext.IsZero() && !got.Equal(wantNext) {
							t.Fatalf("%s in %s: Next(%s) = %s, want %s", expr, zone, x.UTC().Format(time.RFC3339Nano), got.UTC(), wantNext.UTC())
						}
						first := sort.Search(len(ticks), func(i int) bool { return ticks[i].After(w[0]) })
						if got, want := s.CountMissed(w[0], x, 200), min(max(i-first, 0), 200); got != want {
							t.Fatalf("%s in %s: CountMissed(%s, %s) = %d, want %d", expr, zone, w[0].UTC(), x.UTC().Format(time.RFC3339Nano), got, want)
						}
						if got := s.MostRecent(w[0], x); !got.Equal(wantPrev) {
							t.Fatalf("%s in %s: MostRecent(%s, %s) = %s, want %s", expr, zone, w[0].UTC(), x.UTC().Format(time.RFC3339Nano), got.UTC(), wantPrev.UTC())
						}
					}
				}
			}
		}
	}
}

// Where robfig/cron v3.0.1 is right (zones whose offset changes by whole
// hours away from midnight), Next is its Next: Kubernetes CronJobs and
// this runner fire alike.
func TestNextIsRobfigCronsWhereItIsRight(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	from, span := utc("2026-01-01T00:00:00Z"), 5*365*24*time.Hour
	for _, zone := range []string{"UTC", "America/New_York", "Europe/Paris", "Australia/Sydney"} {
		for _, expr := range append(oracleSchedules, "0 0 29 2 *", "5 4 * 1-6 *", "0 9 1-7 * 1") {
			s := mustParse(t, expr, zone)
			for i := 0; i < 300; i++ {
				x := from.Add(time.Duration(rng.Int63n(int64(span))))
				if got, want := s.Next(x), s.spec.Next(x.In(s.loc)); !got.Equal(want) {
					t.Fatalf("%s in %s: Next(%s) = %s, robfig/cron says %s", expr, zone, x.UTC(), got.UTC(), want.UTC())
				}
			}
		}
	}
}

// A search across the last day of a leap year served by a zone's TZ rule
// ends (golang/go#81583 reports that day's period as ended before it).
func TestLeapYearEndInAZoneRule(t *testing.T) {
	s := mustParse(t, "0 12 31 12 *", "Europe/Warsaw")
	if got, want := s.Next(utc("2040-12-30T00:00:00Z")), utc("2040-12-31T11:00:00Z"); !got.Equal(want) {
		t.Fatalf("next %s, want %s", got.UTC(), want)
	}
	daily := mustParse(t, "@daily", "Europe/Warsaw")
	if got, want := daily.Next(utc("2040-12-31T12:00:00Z")), utc("2040-12-31T23:00:00Z"); !got.Equal(want) {
		t.Fatalf("next %s, want %s", got.UTC(), want)
	}
}

func TestWeekdayAndDaysIn(t *testing.T) {
	for d := time.Date(-401, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() < 2402; d = d.AddDate(0, 0, 13) {
		y, m, day := d.Date()
		if got := weekday(y, m, day); got != d.Weekday() {
			t.Fatalf("weekday(%s) = %s, want %s", d.Format("2006-01-02"), got, d.Weekday())
		}
		if got, want := daysIn(y, m), time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day(); got != want {
			t.Fatalf("daysIn(%d, %s) = %d, want %d", y, m, got, want)
		}
	}
}
