package deviceplugin

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/metrics"
)

func TestMetrics(t *testing.T) {
	loop := metrics.NewAgent("v1.2.3")
	m := NewMetrics(loop)
	m.SetDevices("dri-cdi.dev/i915", 3, 1)
	m.Allocation("dri-cdi.dev/i915")
	m.AllocationError("dri-cdi.dev/i915", "unknown_device")
	m.Registration("dri-cdi.dev/i915", nil)
	m.Registration("dri-cdi.dev/xe", errors.New("no kubelet"))
	m.Error("server")

	require.Equal(t, 3.0, testutil.ToFloat64(m.devices.WithLabelValues("dri-cdi.dev/i915", "healthy")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.devices.WithLabelValues("dri-cdi.dev/i915", "unhealthy")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.registered.WithLabelValues("dri-cdi.dev/i915")))
	require.Equal(t, 0.0, testutil.ToFloat64(m.registered.WithLabelValues("dri-cdi.dev/xe")))

	expected := `
# HELP dri_cdi_agent_allocation_errors_total Container allocations refused, per resource and reason.
# TYPE dri_cdi_agent_allocation_errors_total counter
dri_cdi_agent_allocation_errors_total{reason="unknown_device",resource="dri-cdi.dev/i915"} 1
# HELP dri_cdi_agent_errors_total Errors by component: discovery, specs, watch, uevent, server.
# TYPE dri_cdi_agent_errors_total counter
dri_cdi_agent_errors_total{component="server"} 1
`
	require.NoError(t, testutil.GatherAndCompare(loop.Registry, strings.NewReader(expected),
		"dri_cdi_agent_allocation_errors_total", "dri_cdi_agent_errors_total"))
}

func TestNilMetricsAreSafe(t *testing.T) {
	var m *Metrics
	m.SetDevices("x/y", 1, 1)
	m.Allocation("x/y")
	m.AllocationError("x/y", "r")
	m.PreferredAllocation("x/y")
	m.ListAndWatchSent("x/y")
	m.Registration("x/y", nil)
	m.Unregistered("x/y")
	m.Error("c")
}
