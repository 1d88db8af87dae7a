package nri_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/metrics"
)

// TestMetricsExposed: the /metrics the binary serves lists every metric
// docs/metrics-nri.md names, with the label values that exist from the
// start, and the Go collectors.
func TestMetricsExposed(t *testing.T) {
	srv := httptest.NewServer(metrics.Handler(nri.NewMetrics().Registry(), metrics.Health{}))
	t.Cleanup(srv.Close)
	rsp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer rsp.Body.Close()
	require.Equal(t, http.StatusOK, rsp.StatusCode)
	body, err := io.ReadAll(rsp.Body)
	require.NoError(t, err)
	for _, name := range []string{
		"dri_cdi_nri_containers_total", "dri_cdi_nri_containers_injected_total",
		"dri_cdi_nri_device_nodes_injected_total", "dri_cdi_nri_containers_denied_total",
		`dri_cdi_nri_errors_total{reason="unconfirmed"}`, "dri_cdi_nri_hostpath_misuse_total",
		`dri_cdi_nri_handler_duration_seconds_bucket{result="none"`,
		`dri_cdi_nri_podresources_duration_seconds_bucket{result="ok"`,
		"dri_cdi_nri_connected", "dri_cdi_nri_reconnects_total", "dri_cdi_nri_cdi_cards",
		`dri_cdi_nri_cdi_reloads_total{result="ok"}`, "go_goroutines",
	} {
		require.Contains(t, string(body), name)
	}
}
