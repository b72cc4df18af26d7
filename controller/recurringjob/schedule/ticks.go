package schedule

import (
	"math/bits"
	"time"

	"github.com/robfig/cron/v3"
)

// The tick search of a five-field schedule (or a descriptor other than
// @every), forward and backward, over the fields robfig/cron parsed.
//
// An instant is a tick when its wall-clock reading in the schedule's zone
// matches the fields. The timeline splits into periods of one UTC offset
// (time.Time.ZoneBounds); inside one, wall clock and instant differ by
// the offset, so the search runs on the wall calendar, which has no
// daylight saving. Hence the policy: a wall time skipped in spring has no
// instant and does not fire; one repeated in autumn has two and fires at
// both, whatever the size of the shift (whole hours, or Lord Howe's half
// hour).
//
// Each search visits months and days through the fields' bit sets, never
// tick by tick, and gives up after searchHorizon: no schedule that fires
// at all has ticks further apart (29 February: eight years around 2100).

// searchHorizon bounds a search in either direction.
const searchHorizon = 10 * 366 * 24 * time.Hour

// starBit is robfig/cron's mark of a field written * or ?.
const starBit = 1 << 63

// nextBit is the lowest set bit of mask in [from, max]; false when none.
func nextBit(mask uint64, from, max int) (int, bool) {
	if from > max {
		return 0, false
	}
	m := mask >> uint(from) << uint(from) & (1<<uint(max+1) - 1)
	if m == 0 {
		return 0, false
	}
	return bits.TrailingZeros64(m), true
}

// prevBit is the highest set bit of mask in [min, from]; false when none.
func prevBit(mask uint64, from, min int) (int, bool) {
	if from < min {
		return 0, false
	}
	m := mask & (1<<uint(from+1) - 1) >> uint(min) << uint(min)
	if m == 0 {
		return 0, false
	}
	return 63 - bits.LeadingZeros64(m), true
}

var monthDays = [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

func daysIn(y int, m time.Month) int {
	if m == time.February && y%4 == 0 && (y%100 != 0 || y%400 == 0) {
		return 29
	}
	return monthDays[m]
}

// weekday is the day of the week of y-m-d in the proleptic Gregorian
// calendar (Sakamoto's method): time.Date costs more, and this is done
// for every month a search visits.
func weekday(y int, m time.Month, d int) time.Weekday {
	offsets := [13]int{0, 0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4}
	if m < time.March {
		y--
	}
	w := (y + floorDiv(y, 4) - floorDiv(y, 100) + floorDiv(y, 400) + offsets[m] + d) % 7
	if w < 0 {
		w += 7
	}
	return time.Weekday(w)
}

func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// nextDay is the first day in [d, last] of the month whose first day is
// the weekday wd1 that matches the day fields, as robfig/cron's
// dayMatches reads them: both fields when either is * or ?, else either.
func nextDay(sp *cron.SpecSchedule, d, last int, wd1 time.Weekday) (int, bool) {
	return matchDay(sp, d, last, 1, wd1)
}

// prevDay is nextDay backwards: the last matching day in [1, d].
func prevDay(sp *cron.SpecSchedule, d int, wd1 time.Weekday) (int, bool) {
	return matchDay(sp, d, 1, -1, wd1)
}

// matchDay is the first matching day from d towards end (included),
// stepping by dir: +1 forwards, -1 backwards.
func matchDay(sp *cron.SpecSchedule, d, end, dir int, wd1 time.Weekday) (int, bool) {
	dom := func(from int) (int, bool) {
		if dir > 0 {
			return nextBit(sp.Dom, from, end)
		}
		return prevBit(sp.Dom, from, end)
	}
	dow := func(from int) (int, bool) {
		for ; (dir > 0 && from <= end) || (dir < 0 && from >= end); from += dir {
			if sp.Dow&(1<<uint((int(wd1)+from-1)%7)) != 0 {
				return from, true
			}
		}
		return 0, false
	}
	if sp.Dom&starBit != 0 || sp.Dow&starBit != 0 {
		for {
			step()
			a, ok := dom(d)
			if !ok {
				return 0, false
			}
			b, ok := dow(a)
			if !ok {
				return 0, false
			}
			if a == b {
				return a, true
			}
			d = b
		}
	}
	a, okA := dom(d)
	b, okB := dow(d)
	switch {
	case okA && okB:
		// Either field: the nearer day in the direction of travel.
		if dir > 0 {
			return min(a, b), true
		}
		return max(a, b), true
	case okA:
		return a, true
	}
	return b, okB
}

// nextDate is the first matching date at or after y-m-d (d may be past
// the month's end), in a year not after lastYear.
func nextDate(sp *cron.SpecSchedule, y int, m time.Month, d, lastYear int) (int, time.Month, int, bool) {
	for y <= lastYear {
		step()
		nm, ok := nextBit(sp.Month, int(m), 12)
		if !ok {
			y, m, d = y+1, 1, 1
			continue
		}
		if time.Month(nm) != m {
			m, d = time.Month(nm), 1
		}
		wd1 := weekday(y, m, 1)
		if nd, ok := nextDay(sp, d, daysIn(y, m), wd1); ok {
			return y, m, nd, true
		}
		m, d = m+1, 1
	}
	return 0, 0, 0, false
}

// prevDate is the last matching date at or before y-m-d (d may be past
// the month's end), in a year not before firstYear.
func prevDate(sp *cron.SpecSchedule, y int, m time.Month, d, firstYear int) (int, time.Month, int, bool) {
	for y >= firstYear {
		step()
		pm, ok := prevBit(sp.Month, int(m), 1)
		if !ok {
			y, m, d = y-1, 12, 31
			continue
		}
		if time.Month(pm) != m {
			m, d = time.Month(pm), 31
		}
		d = min(d, daysIn(y, m))
		wd1 := weekday(y, m, 1)
		if pd, ok := prevDay(sp, d, wd1); ok {
			return y, m, pd, true
		}
		m, d = m-1, 31
	}
	return 0, 0, 0, false
}

// nextClock is the first matching time of day at or after h:mi:s.
func nextClock(sp *cron.SpecSchedule, h, mi, s int) (int, int, int, bool) {
	for {
		nh, ok := nextBit(sp.Hour, h, 23)
		if !ok {
			return 0, 0, 0, false
		}
		if nh != h {
			h, mi, s = nh, 0, 0
		}
		for {
			nmi, ok := nextBit(sp.Minute, mi, 59)
			if !ok {
				break
			}
			if nmi != mi {
				mi, s = nmi, 0
			}
			if ns, ok := nextBit(sp.Second, s, 59); ok {
				return h, mi, ns, true
			}
			mi, s = mi+1, 0
		}
		h, mi, s = h+1, 0, 0
	}
}

// prevClock is the last matching time of day at or before h:mi:s.
func prevClock(sp *cron.SpecSchedule, h, mi, s int) (int, int, int, bool) {
	for {
		ph, ok := prevBit(sp.Hour, h, 0)
		if !ok {
			return 0, 0, 0, false
		}
		if ph != h {
			h, mi, s = ph, 59, 59
		}
		for {
			pmi, ok := prevBit(sp.Minute, mi, 0)
			if !ok {
				break
			}
			if pmi != mi {
				mi, s = pmi, 59
			}
			if ps, ok := prevBit(sp.Second, s, 0); ok {
				return h, mi, ps, true
			}
			mi, s = mi-1, 59
		}
		h, mi, s = h-1, 59, 59
	}
}

// wallNext is the first matching wall time in [from, limit), both read
// as wall clocks in UTC and whole seconds.
func wallNext(sp *cron.SpecSchedule, from, limit time.Time) (time.Time, bool) {
	y, m, d := from.Date()
	h, mi, s := from.Clock()
	for {
		ny, nm, nd, ok := nextDate(sp, y, m, d, limit.Year())
		if !ok {
			return time.Time{}, false
		}
		if ny != y || nm != m || nd != d {
			y, m, d, h, mi, s = ny, nm, nd, 0, 0, 0
		}
		if ch, cmi, cs, ok := nextClock(sp, h, mi, s); ok {
			w := time.Date(y, m, d, ch, cmi, cs, 0, time.UTC)
			return w, w.Before(limit)
		}
		d, h, mi, s = d+1, 0, 0, 0
	}
}

// wallPrev is the last matching wall time in [floor, from].
func wallPrev(sp *cron.SpecSchedule, from, floor time.Time) (time.Time, bool) {
	y, m, d := from.Date()
	h, mi, s := from.Clock()
	for {
		py, pm, pd, ok := prevDate(sp, y, m, d, floor.Year())
		if !ok {
			return time.Time{}, false
		}
		if py != y || pm != m || pd != d {
			y, m, d, h, mi, s = py, pm, pd, 23, 59, 59
		}
		if ch, cmi, cs, ok := prevClock(sp, h, mi, s); ok {
			w := time.Date(y, m, d, ch, cmi, cs, 0, time.UTC)
			return w, !w.Before(floor)
		}
		h, mi, s = 23, 59, 59
		if d--; d == 0 {
			m, d = m-1, 31
			if m == 0 {
				y, m = y-1, 12
			}
		}
	}
}

// wallOffset is the UTC offset in effect at u in loc, and the period of
// that offset: [start, end), a zero end for one that never ends.
func wallOffset(u time.Time, loc *time.Location) (off time.Duration, start, end time.Time) {
	step()
	lt := u.In(loc)
	_, secs := lt.Zone()
	start, end = lt.ZoneBounds()
	if !end.IsZero() && !end.After(u) {
		// golang/go#81583: in a leap year served by the zone's TZ rule
		// (after its last listed transition), the period that closes the
		// year is said to end 365 days after the year's start, a day
		// early, and so before u. It ends a day later.
		end = end.Add(24 * time.Hour)
		if !end.After(u) {
			end = u.Add(time.Second)
		}
	}
	if start.After(u) {
		start = u
	}
	return time.Duration(secs) * time.Second, start, end
}

// specNext is the first tick in [u, limit), u a whole second; zero when
// there is none.
func specNext(sp *cron.SpecSchedule, loc *time.Location, u, limit time.Time) time.Time {
	for u.Before(limit) {
		off, _, end := wallOffset(u, loc)
		periodEnd := limit
		if !end.IsZero() && end.Before(limit) {
			periodEnd = end
		}
		if w, ok := wallNext(sp, u.UTC().Add(off), periodEnd.UTC().Add(off)); ok {
			return w.Add(-off).In(loc)
		}
		u = periodEnd
	}
	return time.Time{}
}

// specPrev is the last tick in [floor, u], both whole seconds; zero when
// there is none.
func specPrev(sp *cron.SpecSchedule, loc *time.Location, u, floor time.Time) time.Time {
	for !u.Before(floor) {
		off, start, _ := wallOffset(u, loc)
		periodStart := floor
		if !start.IsZero() && start.After(floor) {
			periodStart = start
		}
		if w, ok := wallPrev(sp, u.UTC().Add(off), periodStart.UTC().Add(off)); ok {
			return w.Add(-off).In(loc)
		}
		u = periodStart.Add(-time.Second)
	}
	return time.Time{}
}

// specCount counts the ticks in [u, end], both whole seconds, up to
// limit: one offset lookup per period, not per tick.
func specCount(sp *cron.SpecSchedule, loc *time.Location, u, end time.Time, limit int) int {
	n := 0
	for n < limit && !u.After(end) {
		off, _, periodEnd := wallOffset(u, loc)
		if periodEnd.IsZero() || periodEnd.After(end) {
			periodEnd = end.Add(time.Second)
		}
		w, wallEnd := u.UTC().Add(off), periodEnd.UTC().Add(off)
		for n < limit {
			next, ok := wallNext(sp, w, wallEnd)
			if !ok {
				break
			}
			n, w = n+1, next.Add(time.Second)
		}
		u = periodEnd
	}
	return n
}
