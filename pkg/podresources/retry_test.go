package podresources

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRetryBackoff pins the waits between rate-limited calls: short
// enough that a burst of containers is answered within the deadline,
// doubling so that a kubelet that keeps refusing is not hammered.
func TestRetryBackoff(t *testing.T) {
	b := retryBackoff()
	var got []time.Duration
	for range 7 {
		got = append(got, b.Next())
	}
	ms := time.Millisecond
	require.Equal(t, []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 50 * ms, 50 * ms, 50 * ms}, got)
}
