package schedule

import "time"

// State is what a runner knows of a job when it decides.
type State struct {
	// Created is when the job was made; its first run is at its first
	// tick after this, never at creation.
	Created time.Time
	// LastSchedule is the tick of the last run started; zero before one.
	LastSchedule time.Time
	// LastSkipped is when a due tick was last skipped.
	LastSkipped time.Time
	// ScheduleChanged is when cron or the time zone last changed: ticks
	// before it belong to the old schedule.
	ScheduleChanged time.Time
	// Anchor is when an @every schedule's ticks are counted from: each is
	// Anchor plus a whole number of intervals, at least one. Zero means
	// ScheduleChanged, or Created when the schedule never changed.
	Anchor time.Time

	Suspend bool
	// SkipImmediately: a skip of the due tick may be pending (the job was
	// just created or resumed and its skip not yet recorded); the due tick
	// is not run meanwhile.
	SkipImmediately bool
	// StartingDeadline, when positive, bounds how late a tick may start.
	StartingDeadline time.Duration
	// Active is true while a run of the job has not finished (Forbid).
	Active bool
}

// Action is what to do now.
type Action int

const (
	// Wait: nothing is due.
	Wait Action = iota
	// Run the tick Decision.Tick.
	Run
	// Skip: the due tick waits for its skip to be recorded
	// (LastSkipped = now), if skipImmediately asks for one.
	Skip
	// Missed: the due tick is past its starting deadline; record it (an
	// event) and set LastSkipped to it, so it is reported once; do not run
	// it.
	Missed
	// Forbidden: the due tick came while a run of the job is active
	// (concurrency Forbid); record it (an event) and set LastSkipped to it,
	// so it is never run, not even late.
	Forbidden
)

// String names the action for logs and events.
func (a Action) String() string {
	switch a {
	case Run:
		return "run"
	case Skip:
		return "skip"
	case Missed:
		return "missed"
	case Forbidden:
		return "forbidden"
	}
	return "wait"
}

// Decision is the outcome of Decide.
type Decision struct {
	Action Action
	// Tick is the scheduled time the action is about.
	Tick time.Time
	// MissedTicks counts the ticks that were due since the reference
	// (capped), for the event after downtime.
	MissedTicks int
	// Requeue is when to look again; always positive.
	Requeue time.Duration
}

// maxCountedMisses caps how many missed ticks are counted.
const maxCountedMisses = 100

// suspendedRequeue is how often a suspended job is looked at.
const suspendedRequeue = time.Hour

// requeueSlack is added to the wait for the next tick, so the runner
// wakes just after it rather than just before.
const requeueSlack = 100 * time.Millisecond

// reference is the time after which ticks are due: the latest of
// creation, the last run's tick, the last skip and the last schedule change.
func reference(st State) time.Time {
	ref := st.Created
	for _, t := range []time.Time{st.LastSchedule, st.LastSkipped, st.ScheduleChanged} {
		if t.After(ref) {
			ref = t
		}
	}
	return ref
}

// anchored is s with its @every interval counted from the state's anchor.
func anchored(s Schedule, st State) Schedule {
	switch {
	case !st.Anchor.IsZero():
		return s.countedFrom(st.Anchor)
	case !st.ScheduleChanged.IsZero():
		return s.countedFrom(st.ScheduleChanged)
	}
	return s.countedFrom(st.Created)
}

// NextTick is the tick the job runs at next as Decide sees it, the one
// status.nextScheduleTime shows: the first after both now and the
// reference (the last tick run or skipped, the last change). Zero while
// suspended, or when the schedule has no tick within ten years.
func NextTick(s Schedule, st State, now time.Time) time.Time {
	if st.Suspend {
		return time.Time{}
	}
	return nextTick(anchored(s, st), st, now)
}

func nextTick(s Schedule, st State, now time.Time) time.Time {
	after := reference(st)
	if now.After(after) {
		after = now
	}
	return s.Next(after)
}

// Decide says what a runner should do for a job now: at most one catch-up
// run for the most recent due tick, within the starting deadline when one
// is set; nothing while suspended; a tick due while a run is active is
// forbidden; and a skip of the due tick when skipImmediately is set. The
// requeue is for NextTick.
func Decide(s Schedule, st State, now time.Time) Decision {
	if st.Suspend {
		// Resuming is a change of the job, which brings it back at once:
		// a suspended job needs no timer, only a slow safety net.
		return Decision{Action: Wait, Requeue: suspendedRequeue}
	}
	s = anchored(s, st)
	ref := reference(st)
	d := Decision{Action: Wait, Requeue: time.Hour} // a schedule that stopped firing: look again later
	if next := nextTick(s, st, now); !next.IsZero() {
		d.Requeue = max(next.Sub(now)+requeueSlack, requeueSlack)
	}
	due := s.MostRecent(ref, now)
	if due.IsZero() {
		return d
	}
	d.Tick, d.MissedTicks = due, s.CountMissed(ref, now, maxCountedMisses)
	switch {
	case st.SkipImmediately:
		d.Action = Skip
	case st.Active:
		// Forbid: a tick that comes while the previous run is active is
		// not run, then or later.
		d.Action = Forbidden
	case st.StartingDeadline > 0 && now.Sub(due) > st.StartingDeadline:
		d.Action = Missed
	default:
		d.Action = Run
	}
	return d
}
