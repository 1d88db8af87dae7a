package docs

import (
	"regexp"
	"sort"
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
	var doc []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(dri_cdi_dra_[a-z_]+)` \\|").FindAllStringSubmatch(
		section(t, readDoc(t, "dra-plugin.md"), "Readiness and metrics"), -1) {
		doc = append(doc, m[1])
	}
	sort.Strings(doc)
	reg := prometheus.NewRegistry()
	dra.NewMetrics(reg)
	descs := make(chan *prometheus.Desc, 64)
	reg.Describe(descs)
	close(descs)
	var code []string
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		require.NotNil(t, m, d.String())
		code = append(code, m[1])
	}
	sort.Strings(code)
	require.Equal(t, code, doc)
}
