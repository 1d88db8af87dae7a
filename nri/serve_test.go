package nri_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/nri"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	rsp, err := http.Get(url)
	require.NoError(t, err)
	defer rsp.Body.Close()
	b, err := io.ReadAll(rsp.Body)
	require.NoError(t, err)
	return rsp.StatusCode, string(b)
}

func TestServeMetrics(t *testing.T) {
	m := nri.NewMetrics()
	var healthy atomic.Bool
	health := func() error {
		if !healthy.Load() {
			return errors.New("not connected to the runtime's NRI socket")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr, done, err := nri.ServeMetrics(ctx, "127.0.0.1:0", m, health, func() error { return nil }, logrus.NewEntry(logrus.New()))
	require.NoError(t, err)
	base := "http://" + addr.String()

	code, body := get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, name := range []string{
		"dri_cdi_nri_containers_total", "dri_cdi_nri_containers_injected_total",
		"dri_cdi_nri_device_nodes_injected_total", "dri_cdi_nri_containers_denied_total",
		`dri_cdi_nri_errors_total{reason="unconfirmed"}`, "dri_cdi_nri_hostpath_misuse_total",
		`dri_cdi_nri_handler_duration_seconds_bucket{result="none"`,
		`dri_cdi_nri_podresources_duration_seconds_bucket{result="ok"`,
		"dri_cdi_nri_connected", "dri_cdi_nri_reconnects_total", "dri_cdi_nri_cdi_cards",
		`dri_cdi_nri_cdi_reloads_total{result="ok"}`, "go_goroutines",
	} {
		require.Contains(t, body, name)
	}

	code, body = get(t, base+"/healthz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "not connected")
	healthy.Store(true)
	code, _ = get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)
	code, _ = get(t, base+"/readyz")
	require.Equal(t, http.StatusOK, code)

	cancel()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("metrics server did not stop")
	}
}

func TestServeMetricsBadAddress(t *testing.T) {
	_, _, err := nri.ServeMetrics(context.Background(), "256.0.0.1:http", nri.NewMetrics(), nil, nil, logrus.NewEntry(logrus.New()))
	require.ErrorContains(t, err, "256.0.0.1")
}
