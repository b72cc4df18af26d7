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
	Suspend         bool
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

// Decide says what a runner should do for a job now: at most one catch-up
// run for the most recent due tick, within the starting deadline when one
// is set; nothing while suspended; a tick due while a run is active is
// forbidden; and a skip of the due tick when skipImmediately is set.
func Decide(s Schedule, st State, now time.Time) Decision {
	ref := reference(st)
	requeue := func(after time.Time) time.Duration {
		next := s.Next(after)
		if next.IsZero() {
			return time.Hour // a schedule that stopped firing: look again later
		}
		d := next.Sub(now) + requeueSlack
		if d < requeueSlack {
			d = requeueSlack
		}
		return d
	}
	if st.Suspend {
		// Resuming is a change of the job, which brings it back at once:
		// a suspended job needs no timer, only a slow safety net.
		return Decision{Action: Wait, Requeue: suspendedRequeue}
	}
	due := s.MostRecent(ref, now)
	if due.IsZero() {
		return Decision{Action: Wait, Requeue: requeue(now)}
	}
	missed := s.CountMissed(ref, now, maxCountedMisses)
	switch {
	case st.SkipImmediately:
		return Decision{Action: Skip, Tick: due, MissedTicks: missed, Requeue: requeue(now)}
	case st.Active:
		// Forbid: a tick that comes while the previous run is active is
		// not run, then or later.
		return Decision{Action: Forbidden, Tick: due, MissedTicks: missed, Requeue: requeue(now)}
	case st.StartingDeadline > 0 && now.Sub(due) > st.StartingDeadline:
		return Decision{Action: Missed, Tick: due, MissedTicks: missed, Requeue: requeue(now)}
	}
	return Decision{Action: Run, Tick: due, MissedTicks: missed, Requeue: requeue(now)}
}
