package agent

import (
	"testing"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/backoff"
	"github.com/stretchr/testify/require"
)

// step is one event of a loop test, at a time after the start, and what
// the state must be after it. A zero duration in want* means "not
// scheduled".
type step struct {
	at    time.Duration
	event loopEvent
	// wantPhase, wantTrigger and wantPassAt describe the pass part.
	wantPhase   phase
	wantTrigger string
	wantPassAt  time.Duration
	wantRetry   time.Duration
	// wantRecheck and wantSettleAt describe the re-check part.
	wantRecheck  recheck
	wantSettleAt time.Duration
}

var (
	inotify    = loopEvent{kind: evChange, why: "inotify"}
	uevent     = loopEvent{kind: evChange, why: "uevent"}
	resyncTick = loopEvent{kind: evResync}
	recheckDue = loopEvent{kind: evRecheck}
	passDue    = loopEvent{kind: evPassDue}
	passFailed = loopEvent{kind: evPassFailed}
)

func passOK(unhealthy string) loopEvent { return loopEvent{kind: evPassOK, unhealthy: unhealthy} }

const ms = time.Millisecond

func TestLoopTransitions(t *testing.T) {
	timing := loopTiming{debounce: 20 * ms, maxDelay: 100 * ms, resync: 5 * time.Minute}
	cases := map[string]struct {
		resync           time.Duration // instead of timing's
		unhealthyAtStart string
		steps            []step
	}{
		"healthy start is idle": {
			steps: []step{
				{at: time.Hour, event: passDue, wantPhase: phaseIdle, wantRecheck: recheckNone},
			},
		},
		"events are debounced into one pass": {
			steps: []step{
				{at: 0, event: inotify, wantPhase: phasePending, wantTrigger: "inotify", wantPassAt: 20 * ms, wantRecheck: recheckNone},
				{at: 10 * ms, event: uevent, wantPhase: phasePending, wantTrigger: "inotify", wantPassAt: 30 * ms, wantRecheck: recheckNone},
				{at: 30 * ms, event: passDue, wantPhase: phaseRunning, wantTrigger: "inotify", wantRecheck: recheckNone},
				// A pass caused by change events is echoed shortly after.
				{at: 35 * ms, event: passOK(""), wantPhase: phaseIdle, wantRecheck: recheckEcho, wantSettleAt: 35*ms + echoDelay},
				{at: 35*ms + echoDelay, event: recheckDue, wantPhase: phasePending, wantTrigger: "settle", wantPassAt: 35*ms + echoDelay, wantRecheck: recheckEcho},
				{at: 35*ms + echoDelay, event: passDue, wantPhase: phaseRunning, wantTrigger: "settle", wantRecheck: recheckEcho},
				// The echo pass is not echoed again.
				{at: 40*ms + echoDelay, event: passOK(""), wantPhase: phaseIdle, wantRecheck: recheckNone},
			},
		},
		"a stream of events cannot postpone the pass past max delay": {
			steps: []step{
				{at: 0, event: uevent, wantPhase: phasePending, wantTrigger: "uevent", wantPassAt: 20 * ms, wantRecheck: recheckNone},
				{at: 15 * ms, event: uevent, wantPhase: phasePending, wantTrigger: "uevent", wantPassAt: 35 * ms, wantRecheck: recheckNone},
				{at: 90 * ms, event: uevent, wantPhase: phasePending, wantTrigger: "uevent", wantPassAt: 100 * ms, wantRecheck: recheckNone},
				{at: 99 * ms, event: inotify, wantPhase: phasePending, wantTrigger: "uevent", wantPassAt: 100 * ms, wantRecheck: recheckNone},
			},
		},
		"resync and re-check start a pass at once, even a pending one": {
			steps: []step{
				{at: 0, event: resyncTick, wantPhase: phasePending, wantTrigger: "resync", wantPassAt: 0, wantRecheck: recheckNone},
				{at: 0, event: passDue, wantPhase: phaseRunning, wantTrigger: "resync", wantRecheck: recheckNone},
				{at: ms, event: passOK(""), wantPhase: phaseIdle, wantRecheck: recheckNone},
				{at: 10 * ms, event: inotify, wantPhase: phasePending, wantTrigger: "inotify", wantPassAt: 30 * ms, wantRecheck: recheckNone},
				{at: 12 * ms, event: resyncTick, wantPhase: phasePending, wantTrigger: "inotify", wantPassAt: 12 * ms, wantRecheck: recheckNone},
			},
		},
		"failed passes back off, doubling up to the cap, and reset after a good one": {
			steps: []step{
				{at: 0, event: resyncTick, wantPhase: phasePending, wantTrigger: "resync", wantRecheck: recheckNone},
				{at: 0, event: passDue, wantPhase: phaseRunning, wantTrigger: "resync", wantRecheck: recheckNone},
				{at: 0, event: passFailed, wantPhase: phaseRetrying, wantTrigger: "retry", wantPassAt: time.Second, wantRetry: time.Second, wantRecheck: recheckNone},
				{at: time.Second, event: passDue, wantPhase: phaseRunning, wantTrigger: "retry", wantRetry: time.Second, wantRecheck: recheckNone},
				{at: time.Second, event: passFailed, wantPhase: phaseRetrying, wantTrigger: "retry", wantPassAt: 3 * time.Second, wantRetry: 2 * time.Second, wantRecheck: recheckNone},
				// An event during the backoff brings the retry forward.
				{at: 2 * time.Second, event: uevent, wantPhase: phaseRetrying, wantTrigger: "retry", wantPassAt: 2*time.Second + 20*ms, wantRetry: 2 * time.Second, wantRecheck: recheckNone},
				{at: 2*time.Second + 20*ms, event: passDue, wantPhase: phaseRunning, wantTrigger: "retry", wantRetry: 2 * time.Second, wantRecheck: recheckNone},
				{at: 2*time.Second + 20*ms, event: passOK(""), wantPhase: phaseIdle, wantRecheck: recheckNone},
			},
		},
		"retry backoff stops at its cap": {
			steps: func() []step {
				steps := []step{
					{at: 0, event: resyncTick, wantPhase: phasePending, wantTrigger: "resync", wantRecheck: recheckNone},
					{at: 0, event: passDue, wantPhase: phaseRunning, wantTrigger: "resync", wantRecheck: recheckNone},
				}
				at := time.Duration(0)
				for _, r := range []time.Duration{1, 2, 4, 8, 16, 30, 30} {
					r *= time.Second
					steps = append(steps,
						step{at: at, event: passFailed, wantPhase: phaseRetrying, wantTrigger: "retry", wantPassAt: at + r, wantRetry: r, wantRecheck: recheckNone},
						step{at: at + r, event: passDue, wantPhase: phaseRunning, wantTrigger: "retry", wantRetry: r, wantRecheck: recheckNone})
					at += r
				}
				return steps
			}(),
		},
		"unhealthy cards are re-checked with backoff while nothing changes": {
			unhealthyAtStart: "0000:03:00.0",
			steps: []step{
				{at: minSettle, event: recheckDue, wantPhase: phasePending, wantTrigger: "settle", wantPassAt: minSettle, wantRecheck: recheckUnhealthy},
				{at: minSettle, event: passDue, wantPhase: phaseRunning, wantTrigger: "settle", wantRecheck: recheckUnhealthy},
				{at: minSettle, event: passOK("0000:03:00.0"), wantPhase: phaseIdle, wantRecheck: recheckUnhealthy, wantSettleAt: 3 * minSettle},
				{at: 3 * minSettle, event: recheckDue, wantPhase: phasePending, wantTrigger: "settle", wantPassAt: 3 * minSettle, wantRecheck: recheckUnhealthy},
				{at: 3 * minSettle, event: passDue, wantPhase: phaseRunning, wantTrigger: "settle", wantRecheck: recheckUnhealthy},
				{at: 3 * minSettle, event: passOK("0000:03:00.0"), wantPhase: phaseIdle, wantRecheck: recheckUnhealthy, wantSettleAt: 7 * minSettle},
				// Another set of Unhealthy cards starts the backoff over.
				{at: 7 * minSettle, event: recheckDue, wantPhase: phasePending, wantTrigger: "settle", wantPassAt: 7 * minSettle, wantRecheck: recheckUnhealthy},
				{at: 7 * minSettle, event: passDue, wantPhase: phaseRunning, wantTrigger: "settle", wantRecheck: recheckUnhealthy},
				{at: 7 * minSettle, event: passOK("0000:03:00.0,0000:04:00.0"), wantPhase: phaseIdle, wantRecheck: recheckUnhealthy, wantSettleAt: 8 * minSettle},
				// Healthy again: no more re-checks.
				{at: 8 * minSettle, event: recheckDue, wantPhase: phasePending, wantTrigger: "settle", wantPassAt: 8 * minSettle, wantRecheck: recheckUnhealthy},
				{at: 8 * minSettle, event: passDue, wantPhase: phaseRunning, wantTrigger: "settle", wantRecheck: recheckUnhealthy},
				{at: 8 * minSettle, event: passOK(""), wantPhase: phaseIdle, wantRecheck: recheckNone},
			},
		},
		"an echo is followed by the unhealthy re-check from its start": {
			unhealthyAtStart: "0000:03:00.0",
			steps: []step{
				{at: 0, event: uevent, wantPhase: phasePending, wantTrigger: "uevent", wantPassAt: 20 * ms, wantRecheck: recheckUnhealthy, wantSettleAt: minSettle},
				{at: 20 * ms, event: passDue, wantPhase: phaseRunning, wantTrigger: "uevent", wantRecheck: recheckUnhealthy, wantSettleAt: minSettle},
				{at: 20 * ms, event: passOK("0000:03:00.0"), wantPhase: phaseIdle, wantRecheck: recheckEcho, wantSettleAt: 20*ms + echoDelay},
				{at: 20*ms + echoDelay, event: recheckDue, wantPhase: phasePending, wantTrigger: "settle", wantPassAt: 20*ms + echoDelay, wantRecheck: recheckEcho},
				{at: 20*ms + echoDelay, event: passDue, wantPhase: phaseRunning, wantTrigger: "settle", wantRecheck: recheckEcho},
				{at: 20*ms + echoDelay, event: passOK("0000:03:00.0"), wantPhase: phaseIdle, wantRecheck: recheckUnhealthy, wantSettleAt: 20*ms + echoDelay + minSettle},
			},
		},
		"the re-check interval stops at maxSettle": {
			unhealthyAtStart: "c",
			steps:            settleSteps(maxSettle),
		},
		"the re-check interval stops at the resync interval": {
			resync:           time.Second,
			unhealthyAtStart: "c",
			steps:            settleSteps(time.Second),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			timing := timing
			if tc.resync > 0 {
				timing.resync = tc.resync
			}
			start := time.Unix(1e9, 0)
			abs := func(d time.Duration) time.Time { return start.Add(d) }
			s := startState(tc.unhealthyAtStart, start, timing)
			if tc.unhealthyAtStart == "" {
				require.Equal(t, loopState{phase: phaseIdle, recheck: recheckNone, retry: backoff.New(time.Second, maxRetry)}, s, "start")
			} else {
				require.Equal(t, phaseIdle, s.phase)
				require.Equal(t, abs(minSettle), s.settleAt, "start")
			}
			for i, st := range tc.steps {
				s = s.next(st.event, abs(st.at), timing)
				msg := []any{"step %d (%s at %v): %+v", i, st.event.kind, st.at, s}
				require.Equal(t, st.wantPhase, s.phase, msg...)
				require.Equal(t, st.wantTrigger, s.trigger, msg...)
				require.Equal(t, st.wantRetry, s.retry.Current(), msg...)
				require.Equal(t, st.wantRecheck, s.recheck, msg...)
				if st.wantPhase == phasePending || st.wantPhase == phaseRetrying {
					require.Equal(t, abs(st.wantPassAt), s.passAt, msg...)
				} else {
					require.True(t, s.passAt.IsZero(), msg...)
				}
				if st.wantSettleAt == 0 {
					require.True(t, s.settleAt.IsZero(), msg...)
				} else {
					require.Equal(t, abs(st.wantSettleAt), s.settleAt, msg...)
				}
			}
		})
	}
}

// settleSteps are the re-checks of a card that stays Unhealthy, from the
// first (minSettle after the start) until the interval reaches limit,
// and two more at limit.
func settleSteps(limit time.Duration) []step {
	var steps []step
	at, settle := minSettle, minSettle
	for n := 0; n < 2; {
		next := min(2*settle, limit)
		if next == limit {
			n++
		}
		steps = append(steps,
			step{at: at, event: recheckDue, wantPhase: phasePending, wantTrigger: "settle", wantPassAt: at, wantRecheck: recheckUnhealthy},
			step{at: at, event: passDue, wantPhase: phaseRunning, wantTrigger: "settle", wantRecheck: recheckUnhealthy},
			step{at: at, event: passOK("c"), wantPhase: phaseIdle, wantRecheck: recheckUnhealthy, wantSettleAt: at + next})
		at, settle = at+next, next
	}
	return steps
}
