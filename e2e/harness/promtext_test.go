package harness

import (
	"testing"

	"github.com/stretchr/testify/require"
)

const sampleMetrics = `# HELP dri_cdi_nri_handler_duration_seconds Time in CreateContainer.
# TYPE dri_cdi_nri_handler_duration_seconds histogram
dri_cdi_nri_handler_duration_seconds_bucket{result="verified",le="0.001"} 2
dri_cdi_nri_handler_duration_seconds_bucket{result="verified",le="+Inf"} 3
dri_cdi_nri_handler_duration_seconds_sum{result="verified"} 0.5
dri_cdi_nri_handler_duration_seconds_count{result="verified"} 3
# HELP dri_cdi_dra_devices Devices.
# TYPE dri_cdi_dra_devices gauge
dri_cdi_dra_devices{health="healthy"} 2
dri_cdi_dra_devices{health="unhealthy"} 1
# HELP kubelet_device_plugin_registration_total Registrations.
# TYPE kubelet_device_plugin_registration_total counter
kubelet_device_plugin_registration_total{resource_name="dri-cdi.dev/i915"} 2
kubelet_device_plugin_registration_total{resource_name="dri-cdi.dev/xe"} 1
`

func TestMetrics(t *testing.T) {
	m, err := ParseMetrics(sampleMetrics)
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		name   string
		labels []string
		want   float64
		found  bool
	}{
		"gauge by label":     {"dri_cdi_dra_devices", []string{"health", "unhealthy"}, 1, true},
		"gauge, all summed":  {"dri_cdi_dra_devices", nil, 3, true},
		"counter":            {"kubelet_device_plugin_registration_total", []string{"resource_name", "dri-cdi.dev/i915"}, 2, true},
		"histogram count":    {"dri_cdi_nri_handler_duration_seconds_count", []string{"result", "verified"}, 3, true},
		"histogram sum":      {"dri_cdi_nri_handler_duration_seconds_sum", nil, 0.5, true},
		"no such label":      {"dri_cdi_nri_handler_duration_seconds_count", []string{"result", "error"}, 0, false},
		"no such family":     {"dri_cdi_none", nil, 0, false},
		"histogram, no part": {"dri_cdi_nri_handler_duration_seconds", nil, 0, false},
	} {
		t.Run(name, func(t *testing.T) {
			got, found := m.Sum(tc.name, tc.labels...)
			require.Equal(t, tc.found, found)
			require.Equal(t, tc.want, got)
		})
	}
	require.Equal(t, map[string]bool{"dri_cdi_nri_handler_duration_seconds": true, "dri_cdi_dra_devices": true}, m.Families("dri_cdi_"))

	_, err = ParseMetrics("dri_cdi_x{ 1\n")
	require.ErrorContains(t, err, "parse metrics")
}

func TestMetricsSamples(t *testing.T) {
	m, err := ParseMetrics(sampleMetrics)
	require.NoError(t, err)
	require.ElementsMatch(t, []Sample{
		{Labels: map[string]string{"health": "healthy"}, Value: 2},
		{Labels: map[string]string{"health": "unhealthy"}, Value: 1},
	}, m.Samples("dri_cdi_dra_devices"))
	require.Empty(t, m.Samples("dri_cdi_nri_handler_duration_seconds"), "a histogram has no single value")
	require.Empty(t, m.Samples("dri_cdi_none"))
}

func TestMetricsHistogram(t *testing.T) {
	m, err := ParseMetrics(sampleMetrics)
	require.NoError(t, err)
	sum, count := m.Histogram("dri_cdi_nri_handler_duration_seconds", "result", "verified")
	require.Equal(t, 0.5, sum)
	require.Equal(t, 3.0, count)
	sum, count = m.Histogram("dri_cdi_nri_handler_duration_seconds", "result", "refused")
	require.Zero(t, sum)
	require.Zero(t, count)
}
