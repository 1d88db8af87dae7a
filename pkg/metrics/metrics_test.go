package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/metrics/metricstest"
)

func TestAgentMetrics(t *testing.T) {
	a := NewAgent("v1.2.3")
	a.SpecSync(true, nil)
	a.SpecSync(false, nil)
	a.SpecSync(false, errors.New("disk full"))
	a.Discovery("startup", 2)
	a.Error("uevent")
	a.Reconciled(30 * time.Millisecond)

	require.Equal(t, 1.0, testutil.ToFloat64(a.specSyncs.WithLabelValues("error")))
	require.Equal(t, 2.0, testutil.ToFloat64(a.skipped))

	expected := `
# HELP dri_cdi_agent_errors_total Errors by component: discovery, specs, watch, uevent, server.
# TYPE dri_cdi_agent_errors_total counter
dri_cdi_agent_errors_total{component="uevent"} 1
`
	require.NoError(t, testutil.GatherAndCompare(a.Registry, strings.NewReader(expected), "dri_cdi_agent_errors_total"))
	n, err := testutil.GatherAndCount(a.Registry, "dri_cdi_agent_build_info", "process_resident_memory_bytes")
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

func TestNilAgentIsSafe(t *testing.T) {
	var a *Agent
	a.SpecSync(true, nil)
	a.Error("c")
	a.Discovery("t", 0)
	a.Reconciled(time.Second)
}

func TestServe(t *testing.T) {
	a := NewAgent("test")
	a.Discovery("startup", 0)
	var ready atomic.Bool
	check := func() error {
		if !ready.Load() {
			return errors.New("not registered yet")
		}
		return nil
	}

	l, err := Listen("127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var warnings atomic.Pointer[[]string]
	warnings.Store(&[]string{})
	h := Handler(a.Registry, Health{Ready: check, Warnings: func() []string { return *warnings.Load() }})
	go func() { done <- Serve(ctx, l, h, logrus.NewEntry(logrus.New())) }()
	base := "http://" + l.Addr().String()

	expect := func(path string, code int, body string) {
		t.Helper()
		gotCode, gotBody := metricstest.Get(t, base+path)
		require.Equal(t, code, gotCode, path)
		require.Equal(t, body, gotBody, path)
	}
	// Alive while not ready: /healthz has no check.
	expect("/healthz", http.StatusOK, "ok\n")
	expect("/readyz", http.StatusServiceUnavailable, "not ready: not registered yet\n")
	ready.Store(true)
	expect("/readyz", http.StatusOK, "ok\n")

	// Warnings follow the verdict, ready or not, and never change it.
	warnings.Store(&[]string{"/sys/class/drm: does not exist", "second"})
	expect("/readyz", http.StatusOK, "ok\nwarning: /sys/class/drm: does not exist\nwarning: second\n")
	ready.Store(false)
	expect("/readyz", http.StatusServiceUnavailable, "not ready: not registered yet\nwarning: /sys/class/drm: does not exist\nwarning: second\n")
	expect("/healthz", http.StatusOK, "ok\n")
	code, body := metricstest.Get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `dri_cdi_agent_discoveries_total{trigger="startup"} 1`)

	cancel()
	require.NoError(t, <-done)
}

// TestHealthWithoutReadyCheck: a binary without a ready check is ready
// as soon as it serves.
func TestHealthWithoutReadyCheck(t *testing.T) {
	srv := httptest.NewServer(Handler(NewAgent("test").Registry, Health{}))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/healthz", "/readyz"} {
		code, body := metricstest.Get(t, srv.URL+path)
		require.Equal(t, http.StatusOK, code, path)
		require.Equal(t, "ok\n", body, path)
	}
}

func TestListenBadAddress(t *testing.T) {
	for _, addr := range []string{"not an address", "256.0.0.1:http"} {
		_, err := Listen(addr)
		require.ErrorContains(t, err, strconv.Quote(addr))
	}
}
