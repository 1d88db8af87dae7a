// Package metricstest holds test helpers for the daemons' metrics and
// health server (pkg/metrics).
package metricstest

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Get fetches url (a /metrics, /healthz or /readyz address) and returns
// the status code and the body; a request that fails fails the test.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
