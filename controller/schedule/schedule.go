// Package schedule holds the schedule maths of recurring jobs as pure
// functions of (schedule, time zone, status, now), in the style of the
// Kubernetes CronJob controller's utils: no clients, no clock reads.
//
// Daylight saving follows robfig/cron evaluated in the job's time zone, as
// Kubernetes CronJobs do: a tick inside the hour skipped in spring does
// not fire that day, and a tick inside the hour repeated in autumn fires
// at each of its two instants.
package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule is a parsed cron expression in a time zone.
type Schedule struct {
	cron cron.Schedule
	loc  *time.Location
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
	return Schedule{cron: c, loc: loc}, nil
}

// Next is the first tick strictly after t; zero when there is none.
func (s Schedule) Next(t time.Time) time.Time {
	return s.cron.Next(t.In(s.loc))
}

// MostRecent is the latest tick in (after, now], or zero when there is
// none. It takes bounded time however many ticks were missed: it looks
// back from now in windows that double until one holds a tick, then walks
// the ticks of that window only.
func (s Schedule) MostRecent(after, now time.Time) time.Time {
	if !now.After(after) {
		return time.Time{}
	}
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

// CountMissed counts the ticks in (after, now], stopping at limit.
func (s Schedule) CountMissed(after, now time.Time, limit int) int {
	n := 0
	for t := s.Next(after); !t.IsZero() && !t.After(now) && n < limit; t = s.Next(t) {
		n++
	}
	return n
}
