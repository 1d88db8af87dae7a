// Package agenttest runs the discovery and spec loop, or a command built
// on it, in a test: on a free loopback metrics port, until the test ends.
package agenttest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Wait bounds how long Serve waits for a start or a stop.
const Wait = 15 * time.Second

// Running is a loop Serve runs until the test ends.
type Running struct {
	// Metrics is the base URL of its metrics server.
	Metrics string
	// Cancel ends it early.
	Cancel context.CancelFunc
	// Done receives its result once.
	Done chan error
}

// Serve runs run(ctx, onListen) until the test ends, when it must stop
// in time and without an error; run passes onListen on as the loop's
// OnMetricsListen and serves its metrics on 127.0.0.1:0. Serve returns
// once the metrics server listens, and fails the test if run ends first.
func Serve(t testing.TB, run func(ctx context.Context, onListen func(net.Addr)) error) *Running {
	t.Helper()
	addr := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{Cancel: cancel, Done: make(chan error, 1)}
	go func() { r.Done <- run(ctx, func(a net.Addr) { addr <- a }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-r.Done:
			require.NoError(t, err)
		case <-time.After(Wait):
			t.Error("it did not stop")
		}
	})
	select {
	case a := <-addr:
		r.Metrics = "http://" + a.String()
	case err := <-r.Done:
		r.Done <- err // for the cleanup
		t.Fatalf("it stopped: %v", err)
	}
	return r
}
