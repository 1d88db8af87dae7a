package backoff

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNext(t *testing.T) {
	for name, tc := range map[string]struct {
		lo, hi time.Duration
		want   []time.Duration
	}{
		"doubles up to max": {time.Second, 5 * time.Second, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}},
		"max below min":     {time.Second, time.Millisecond, []time.Duration{time.Second, time.Second}},
		"min equals max":    {3 * time.Millisecond, 3 * time.Millisecond, []time.Duration{3 * time.Millisecond, 3 * time.Millisecond}},
	} {
		t.Run(name, func(t *testing.T) {
			b := New(tc.lo, tc.hi)
			require.Zero(t, b.Current())
			var got []time.Duration
			for range tc.want {
				got = append(got, b.Next())
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.want[len(tc.want)-1], b.Current())
		})
	}
}

func TestReset(t *testing.T) {
	b := New(time.Millisecond, time.Second)
	b.Next()
	b.Next()
	require.Equal(t, 2*time.Millisecond, b.Current())
	b.Reset()
	require.Zero(t, b.Current())
	require.Equal(t, time.Millisecond, b.Next())
}

// A copy is independent: the agent's pure state machine copies its state
// (and the Backoff in it) at every transition.
func TestValueSemantics(t *testing.T) {
	a := New(time.Millisecond, time.Second)
	a.Next()
	b := a
	b.Next()
	require.Equal(t, time.Millisecond, a.Current())
	require.Equal(t, 2*time.Millisecond, b.Current())
}

func TestSleep(t *testing.T) {
	b := New(time.Millisecond, time.Millisecond)
	require.NoError(t, b.Sleep(context.Background()))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	long := New(time.Hour, time.Hour)
	require.ErrorIs(t, long.Sleep(ctx), context.Canceled)
}
