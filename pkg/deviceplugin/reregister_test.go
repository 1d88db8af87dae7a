package deviceplugin

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
)

// shortRegisterTimeout lets a test hold a registration at the kubelet
// past the plugin's deadline without waiting seconds.
const shortRegisterTimeout = 250 * time.Millisecond

// startQuick is start with a short register timeout.
func startQuick(t *testing.T) *env {
	t.Helper()
	return startWith(t, true, Options{Delivery: DeliveryCDICRI, Log: testLog(t), RegisterTimeout: shortRegisterTimeout})
}

// settled waits until the resource is registered on our side and the
// kubelet's latest endpoint of it is our current socket with a live
// stream that delivered the devices.
func (e *env) settled(t *testing.T, why string) {
	t.Helper()
	if !assert.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, e.m.Ready())
		ep := e.k.Endpoint(res)
		require.NotNil(c, ep, "the kubelet has no endpoint")
		require.False(c, ep.Ended(), "the kubelet's stream ended: %v", ep.Err())
		require.Equal(c, e.m.SocketPath(res), ep.Socket, "the kubelet's endpoint is not the socket we serve")
		require.Equal(c, map[string]string{testCard("0000:03:00.0", 0, 0).ID: pluginapi.Healthy}, ep.Health())
	}, wait, 10*time.Millisecond) {
		t.Fatalf("%s: not registered again (kubelet: %d registrations, %d failed)", why, e.k.RegistrationsOf(res), e.k.Failed())
	}
}

// ourSockets lists the sockets of ours in dir.
func ourSockets(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), SocketPrefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// agentGoroutines counts the goroutines of the manager under test: those
// labelled agentLabel (startWith runs it so, and update calls it so; the
// goroutines a goroutine starts inherit its labels), not the fake
// kubelet's, which leaks like the real one.
func agentGoroutines(t *testing.T) int {
	var b bytes.Buffer
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&b, 1))
	n, group := 0, 0
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == "@" {
			group, _ = strconv.Atoi(f[0])
		} else if strings.HasPrefix(line, "# labels: ") && strings.Contains(line, `"side":"agent"`) {
			n += group
		}
	}
	return n
}

// update is Manager.Update as the agent's goroutine.
func (e *env) update(t *testing.T, pools ...config.Pool) {
	t.Helper()
	var err error
	pprof.Do(context.Background(), agentLabel, func(context.Context) { err = e.m.Update(pools, nil) })
	require.NoError(t, err)
}

// snapshot asserts that one server of ours listens, with one socket in
// the dir, and one connection (the kubelet's stream) is open to it, and
// returns how many goroutines the manager runs. The fds the manager
// could leak are those sockets.
func (e *env) snapshot(t *testing.T, c *assert.CollectT) (goroutines int) {
	listening, accepted, err := kubelettest.UnixSockets(filepath.Join(e.dir, SocketPrefix))
	require.NoError(c, err)
	require.Equal(c, 1, listening, "our servers")
	require.Equal(c, 1, accepted, "connections to our servers")
	require.Len(c, ourSockets(t, e.dir), 1)
	return agentGoroutines(t)
}

// quiet waits until snapshot holds and returns the goroutines then.
func (e *env) quiet(t *testing.T) int {
	t.Helper()
	var n int
	require.EventuallyWithT(t, func(c *assert.CollectT) { n = e.snapshot(t, c) }, wait, 10*time.Millisecond, "never quiet")
	return n
}

// backToBaseline waits until snapshot holds with no more goroutines than
// at the start.
func (e *env) backToBaseline(t *testing.T, start int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.LessOrEqual(c, e.snapshot(t, c), start, "the manager's goroutines")
	}, wait, 10*time.Millisecond, "not back to the start")
}

// TestRegistrationTheKubeletStoredAfterOurDeadline is the kubelet that
// answers a Register after the plugin gave up: it has stored the
// endpoint, so the same socket path is refused from then on ("device
// plugin already connected"), and every refused attempt leaves a
// connection to our server open. The plugin must register again on a
// new socket and close what the kubelet opened.
func TestRegistrationTheKubeletStoredAfterOurDeadline(t *testing.T) {
	e := startQuick(t)
	e.k.SlowNext(1, 5*shortRegisterTimeout)
	e.update(t, pool(res, 1, testCard("0000:03:00.0", 0, 0)))
	e.settled(t, "after a registration stored past our deadline")
	e.quiet(t)
}

// TestKubeletRestartsAtAwkwardMoments restarts the kubelet again and
// again, the way it restarts (every socket deleted, kubelet.sock
// created) and at awkward moments. After each the resource must be
// registered again, and at the end the process must hold what it held
// at the start.
func TestKubeletRestartsAtAwkwardMoments(t *testing.T) {
	e := startQuick(t)
	e.update(t, pool(res, 1, testCard("0000:03:00.0", 0, 0)))
	e.settled(t, "first registration")
	start := e.quiet(t)

	steps := []struct {
		name string
		do   func(t *testing.T)
	}{
		{"restart", func(t *testing.T) { require.NoError(t, e.k.Restart(false)) }},
		{"restart, the registration stored past our deadline", func(t *testing.T) {
			e.k.SlowNext(1, 5*shortRegisterTimeout)
			require.NoError(t, e.k.Restart(false))
		}},
		{"restart, two registrations stored past our deadline", func(t *testing.T) {
			e.k.SlowNext(2, 3*shortRegisterTimeout)
			require.NoError(t, e.k.Restart(false))
		}},
		{"restart during a registration", func(t *testing.T) {
			e.k.SlowNext(1, time.Hour)
			require.NoError(t, e.k.Restart(false))
			require.Eventually(t, func() bool { return e.k.InFlight() > 0 }, wait, tick)
			require.NoError(t, e.k.Restart(false))
		}},
		{"kubelet dir wiped", func(t *testing.T) { require.NoError(t, e.k.Restart(true)) }},
		{"kubelet.sock replaced, then our socket removed", func(t *testing.T) {
			require.NoError(t, e.k.Replace())
			require.NoError(t, os.Remove(e.m.SocketPath(res)))
		}},
		{"our socket removed, the kubelet running", func(t *testing.T) {
			require.NoError(t, os.Remove(e.m.SocketPath(res)))
		}},
		{"stopped, then started after a while", func(t *testing.T) {
			e.k.Stop()
			require.Eventually(t, func() bool { return e.m.Ready() != nil }, wait, tick)
			k, err := kubelettest.Start(e.dir)
			require.NoError(t, err)
			e.k = k
		}},
	}
	for round := range 2 {
		for _, s := range steps {
			s.do(t)
			e.settled(t, s.name)
			if round == 0 {
				// Nothing may pile up, step by step.
				e.backToBaseline(t, start)
			}
		}
	}
	e.backToBaseline(t, start)
}

// TestNoNewServerWhileNoKubeletListens: a kubelet.sock that nobody
// listens on (a killed kubelet leaves it behind) fails every attempt
// before any kubelet could dial us, so the server and its socket stay.
func TestNoNewServerWhileNoKubeletListens(t *testing.T) {
	e := startQuick(t)
	e.k.Stop()
	l, err := net.Listen("unix", e.k.Socket())
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())

	e.update(t, pool(res, 1, testCard("0000:03:00.0", 0, 0)))
	first := e.m.SocketPath(res)
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(e.metrics.registrations.WithLabelValues(res, "error")) >= 3
	}, wait, tick)
	require.Equal(t, first, e.m.SocketPath(res))
	require.Equal(t, []string{filepath.Base(first)}, ourSockets(t, e.dir))

	require.NoError(t, os.Remove(e.k.Socket()))
	k, err := kubelettest.Start(e.dir)
	require.NoError(t, err)
	e.k = k
	e.settled(t, "kubelet started")
	require.Equal(t, first, e.m.SocketPath(res))
}
