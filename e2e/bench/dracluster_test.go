package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A sample is the kubelet's sum growth over exactly one call.
func TestPrepareSample(t *testing.T) {
	for name, tc := range map[string]struct {
		sum0, n0, sum1, n1 float64
		want               time.Duration
		ok                 bool
	}{
		"one call":      {sum0: 0.5, n0: 10, sum1: 0.5021, n1: 11, want: 2100 * time.Microsecond, ok: true},
		"no call":       {sum0: 0.5, n0: 10, sum1: 0.5, n1: 10},
		"two calls":     {sum0: 0.5, n0: 10, sum1: 0.51, n1: 12},
		"kubelet reset": {sum0: 0.5, n0: 10, sum1: 0.001, n1: 1},
	} {
		t.Run(name, func(t *testing.T) {
			d, ok := prepareSample(tc.sum0, tc.n0, tc.sum1, tc.n1)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.InDelta(t, tc.want, d, float64(time.Microsecond))
			}
		})
	}
}
