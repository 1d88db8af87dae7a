// Package backoff is the one retry backoff of dri-cdi: every retry loop
// (device plugin registration, the NRI connection, the PodResources
// retry in CreateContainer, the DRA helper start, the agent's failed
// passes) waits by it. gRPC's own connection backoff stays gRPC's.
//
// # Shape
//
// A Backoff is a value: the first wait is Min, each next one doubles, up
// to Max; Reset starts over after a success. It holds no timer and reads
// no clock, so a pure state machine can keep one in its state (the
// agent's loop does) and a hot path pays two comparisons for it.
//
// # Example
//
//	b := backoff.New(time.Second, 30*time.Second)
//	for {
//		if err := try(); err == nil {
//			b.Reset()
//			break
//		}
//		if err := b.Sleep(ctx); err != nil {
//			return err
//		}
//	}
package backoff

import (
	"context"
	"time"
)

// Backoff is an exponential backoff from Min to Max. The zero value
// waits 0 every time; use New.
type Backoff struct {
	min, max time.Duration
	cur      time.Duration
}

// New returns a Backoff whose first wait is lo, doubling up to hi; hi
// below lo is taken as lo.
func New(lo, hi time.Duration) Backoff {
	return Backoff{min: lo, max: max(lo, hi)}
}

// Next returns the next wait and advances the backoff.
func (b *Backoff) Next() time.Duration {
	b.cur = min(max(2*b.cur, b.min), b.max)
	return b.cur
}

// Current returns the last wait Next returned, 0 after New or Reset.
func (b Backoff) Current() time.Duration { return b.cur }

// Reset starts over: the next wait is Min again.
func (b *Backoff) Reset() { b.cur = 0 }

// Min and Max return the bounds.
func (b Backoff) Min() time.Duration { return b.min }

// Max returns the largest wait.
func (b Backoff) Max() time.Duration { return b.max }

// Sleep waits Next() or until ctx ends, and then returns ctx's error.
func (b *Backoff) Sleep(ctx context.Context) error {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
