package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/pkg/backoff"
	"github.com/dri-cdi/dri-cdi/pkg/watch"
)

// The agent loop is a small state machine. loopState.next is its
// transition function: pure, so that loop_test.go can drive it with a
// table of events and times. loop feeds it the events (change events,
// the resync ticker and its two timers), runs the pass when the state
// says so, and keeps the timers at the times the state names.
//
// Two parts make up the state. The pass part (phase) says whether a pass
// is due, and why:
//
//	idle ──change/resync/recheck──► pending ──passDue──► running ──passOK──► idle
//	                  ▲                                   │
//	                  └──── retrying ◄──passFailed────────┘
//
// A pending pass starts Debounce after the last change event, but never
// later than MaxDelay after the first; a resync or re-check starts it at
// once. A failed pass runs again after a backoff that doubles up to
// maxRetry (retrying); events meanwhile can only bring it forward.
//
// The re-check part (recheck) schedules one more pass after a good one:
// echo shortly after a pass caused by change events, unhealthy while
// cards are Unhealthy (backing off while the set stays the same), none
// otherwise.

// phase is where the pass part of the loop is.
type phase string

const (
	// phaseIdle: no pass is due; the resync, a re-check or a change event
	// starts one.
	phaseIdle phase = "idle"
	// phasePending: a pass is due at passAt; change events are debounced
	// into it.
	phasePending phase = "pending"
	// phaseRetrying: the last pass failed; it runs again at passAt.
	phaseRetrying phase = "retrying"
	// phaseRunning: the loop runs the pass (Reconcile(trigger)) and reports
	// how it went; no other event is taken meanwhile.
	phaseRunning phase = "running"
)

// recheck is the kind of re-check scheduled after the last good pass.
type recheck string

const (
	// recheckNone: every card is healthy and no change event caused the
	// pass.
	recheckNone recheck = "none"
	// recheckEcho: one more pass echoDelay after a pass caused by change
	// events, since a change can finish after its last event (udev adding
	// a by-path link, sysfs catching up).
	recheckEcho recheck = "echo"
	// recheckUnhealthy: cards are Unhealthy; a removal takes the nodes
	// first and the sysfs device last, and without a uevent nothing else
	// announces the last step. The interval starts at minSettle and doubles
	// while the Unhealthy set stays the same.
	recheckUnhealthy recheck = "unhealthy"
)

// eventKind is what happened to the loop.
type eventKind string

const (
	evChange     eventKind = "change"      // an inotify or uevent event (why says which)
	evResync     eventKind = "resync"      // the resync ticker
	evRecheck    eventKind = "recheck"     // the re-check timer fired
	evPassDue    eventKind = "pass due"    // the pass timer fired
	evPassOK     eventKind = "pass ok"     // the pass succeeded (unhealthy: its Unhealthy cards)
	evPassFailed eventKind = "pass failed" // the pass failed
)

// loopEvent is one input of the state machine.
type loopEvent struct {
	kind eventKind
	// why is the trigger of a change: "inotify" or "uevent".
	why string
	// unhealthy lists, for evPassOK, the Unhealthy cards (comma-joined).
	unhealthy string
}

// loopTiming are the durations the transitions use.
type loopTiming struct {
	debounce, maxDelay, resync time.Duration
}

// loopState is the agent loop's state.
type loopState struct {
	phase phase
	// trigger is why the pending or running pass runs: the cause of the
	// event that started it ("inotify", "uevent", "resync", "settle",
	// "retry", "startup"). Reconcile reports it.
	trigger string
	// first is when that pass was first asked for; deadline the latest it
	// may start; passAt when it starts (zero unless pending or retrying).
	first, deadline, passAt time.Time
	// retry is the backoff after the failed passes in a row (1 s doubling
	// to maxRetry); reset by a good pass.
	retry backoff.Backoff

	recheck recheck
	// settle is the interval of the re-check; settleAt when it fires
	// (zero when none is scheduled).
	settle   time.Duration
	settleAt time.Time
	// unhealthy are the Unhealthy cards after the last good pass.
	unhealthy string
}

// startState is the state after the first pass, which Run makes before
// the loop starts: idle, with the re-check that pass calls for.
func startState(unhealthy string, now time.Time, t loopTiming) loopState {
	s := loopState{phase: phaseRunning, trigger: "startup", retry: backoff.New(time.Second, maxRetry)}
	return s.next(loopEvent{kind: evPassOK, unhealthy: unhealthy}, now, t)
}

// next is the transition function: the state after e at now. An event
// that cannot happen in the current phase (a pass result while no pass
// runs, a due pass while none is pending) leaves the state as it is.
func (s loopState) next(e loopEvent, now time.Time, t loopTiming) loopState {
	if s.phase == phaseRunning {
		switch e.kind {
		case evPassOK:
			s = s.settled(e.unhealthy, now, t)
			s.phase = phaseIdle
			s.retry.Reset()
			s.trigger, s.first, s.deadline = "", time.Time{}, time.Time{}
		case evPassFailed:
			wait := s.retry.Next()
			s.phase = phaseIdle
			s = s.arm("retry", wait, now, t)
			s.phase = phaseRetrying
		}
		return s
	}
	switch e.kind {
	case evChange:
		s = s.arm(e.why, t.debounce, now, t)
	case evResync:
		s = s.arm("resync", 0, now, t)
	case evRecheck:
		s.settleAt = time.Time{}
		s = s.arm("settle", 0, now, t)
	case evPassDue:
		if s.phase == phasePending || s.phase == phaseRetrying {
			s.phase, s.passAt = phaseRunning, time.Time{}
		}
	}
	return s
}

// arm asks for a pass after the given time. The first request of a pass
// sets its trigger and its deadline, MaxDelay (or after, if longer)
// later; later requests can bring it forward, never past the deadline.
func (s loopState) arm(why string, after time.Duration, now time.Time, t loopTiming) loopState {
	if s.phase == phaseIdle {
		s.phase, s.first, s.trigger, s.deadline = phasePending, now, why, now.Add(max(t.maxDelay, after))
	}
	s.passAt = minTime(now.Add(after), s.deadline)
	return s
}

// settled schedules the re-check after a good pass with the given
// Unhealthy cards.
func (s loopState) settled(unhealthy string, now time.Time, t loopTiming) loopState {
	switch {
	case s.trigger == "inotify" || s.trigger == "uevent":
		s.recheck, s.settle = recheckEcho, echoDelay
	case unhealthy == "":
		s.recheck, s.settle = recheckNone, 0
	case unhealthy != s.unhealthy || s.settle < minSettle:
		s.recheck, s.settle = recheckUnhealthy, minSettle
	default:
		s.recheck, s.settle = recheckUnhealthy, min(2*s.settle, maxSettle, t.resync)
	}
	s.unhealthy = unhealthy
	s.settleAt = time.Time{}
	if s.settle > 0 {
		s.settleAt = now.Add(s.settle)
	}
	return s
}

// loop feeds the state machine until ctx ends: change events, the
// resync ticker and its timers in, passes out.
func (a *agent) loop(ctx context.Context, driEvents <-chan watch.Event, uevents <-chan watch.Uevent) {
	t := loopTiming{debounce: a.opts.Debounce, maxDelay: a.opts.MaxDelay, resync: a.opts.ResyncInterval}
	if t.debounce <= 0 {
		t.debounce = DefaultDebounce
	}
	if t.maxDelay <= 0 {
		t.maxDelay = DefaultMaxDelay
	}
	resync := time.NewTicker(a.opts.ResyncInterval)
	defer resync.Stop()
	passTimer, recheckTimer := stoppedTimer(), stoppedTimer()
	defer passTimer.Stop()
	defer recheckTimer.Stop()

	var s loopState
	apply := func(next loopState) {
		resetTimer(passTimer, s.passAt, next.passAt)
		resetTimer(recheckTimer, s.settleAt, next.settleAt)
		s = next
	}
	on := func(e loopEvent) { apply(s.next(e, time.Now(), t)) }
	apply(startState(strings.Join(a.rec.Unhealthy(), ","), time.Now(), t))
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-driEvents:
			if !ok {
				driEvents = nil
				continue
			}
			a.log.WithFields(logrus.Fields{"path": ev.Path, "mask": fmt.Sprintf("%#x", ev.Mask)}).Trace("inotify")
			on(loopEvent{kind: evChange, why: "inotify"})
		case ev, ok := <-uevents:
			if !ok {
				uevents = nil
				continue
			}
			a.log.WithFields(logrus.Fields{"action": ev.Action, "devpath": ev.DevPath, "subsystem": ev.Subsystem}).Trace("uevent")
			on(loopEvent{kind: evChange, why: "uevent"})
		case <-resync.C:
			on(loopEvent{kind: evResync})
		case <-recheckTimer.C:
			on(loopEvent{kind: evRecheck})
		case <-passTimer.C:
			on(loopEvent{kind: evPassDue})
			if err := a.pass(s.trigger, s.first); err != nil {
				on(loopEvent{kind: evPassFailed})
				a.log.WithError(err).WithField("retry_in", s.retry.Current()).Error("sync failed")
				continue
			}
			on(loopEvent{kind: evPassOK, unhealthy: strings.Join(a.rec.Unhealthy(), ",")})
		}
	}
}

// pass is one rescan, for the given trigger, asked for at first.
func (a *agent) pass(trigger string, first time.Time) error {
	a.paths.check()
	err := a.rec.Reconcile(trigger)
	a.met.Reconciled(time.Since(first))
	return err
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// resetTimer moves t from firing at old to firing at at (zero: never).
func resetTimer(t *time.Timer, old, at time.Time) {
	switch {
	case at.Equal(old):
	case at.IsZero():
		t.Stop()
	default:
		t.Reset(time.Until(at))
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
