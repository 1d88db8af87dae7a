package docs

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/dra"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
)

// TestDRAPluginFlagsDocumented checks dra-plugin.md's flag table against
// cmd/dri-cdi-dra.
func TestDRAPluginFlagsDocumented(t *testing.T) {
	flags := flagNames(dra.NewFlagSet(&dra.RunOptions{}, &logging.Flags{}))
	require.NotEmpty(t, flags)
	require.Equal(t, flags, documented(t, readDoc(t, "dra-plugin.md"), "Flags"))
}

// TestDRAPluginMetricsDocumented checks its metric table against what
// pkg/dra registers.
func TestDRAPluginMetricsDocumented(t *testing.T) {
	reg := prometheus.NewRegistry()
	dra.NewMetrics(reg)
	requireMetricsDocumented(t, "dra-plugin.md", "Readiness and metrics", "dri_cdi_dra_", reg)
}
