package docs

import (
	"regexp"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin"
	"github.com/dri-cdi/dri-cdi/pkg/metrics"
	"github.com/dri-cdi/dri-cdi/pkg/usage"
)

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// requireMetricsDocumented checks that the metric table of a page's
// section lists exactly the metrics named prefix* that reg registers.
func requireMetricsDocumented(t *testing.T, page, heading, prefix string, reg *prometheus.Registry) {
	t.Helper()
	cell := regexp.MustCompile("(?m)^\\| `(" + prefix + "[a-z_]+)` \\|")
	var doc []string
	for _, m := range cell.FindAllStringSubmatch(section(t, readDoc(t, page), heading), -1) {
		doc = append(doc, m[1])
	}
	sort.Strings(doc)

	descs := make(chan *prometheus.Desc, 1024)
	reg.Describe(descs)
	close(descs)
	var code []string
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		require.NotNil(t, m, d.String())
		if regexp.MustCompile(`^` + prefix).MatchString(m[1]) {
			code = append(code, m[1])
		}
	}
	sort.Strings(code)
	require.NotEmpty(t, code)
	require.Equal(t, code, doc, page)
}

// TestAgentMetricsDocumented checks the agent section of metrics.md
// against the metrics dri-cdi-agent registers: the discovery and spec
// loop's and the device plugin's.
func TestAgentMetricsDocumented(t *testing.T) {
	loop := metrics.NewAgent("test")
	deviceplugin.NewMetrics(loop)
	requireMetricsDocumented(t, "metrics.md", "dri-cdi-agent", "dri_cdi_agent_", loop.Registry)
}

// TestNRIMetricsDocumented checks metrics-nri.md against the metrics the
// NRI plugin registers.
func TestNRIMetricsDocumented(t *testing.T) {
	requireMetricsDocumented(t, "metrics-nri.md", "dri-cdi-nri", "dri_cdi_nri_", nri.NewMetrics().Registry())
}

// TestUsageMetricsDocumented checks the usage section of metrics.md
// against what the usage collector (dri-cdi-agent and dri-cdi-dra with
// --usage) registers.
func TestUsageMetricsDocumented(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(usage.NewCollector(usage.NewMonitor(usage.Options{})))
	requireMetricsDocumented(t, "metrics.md", "Usage", usage.MetricPrefix, reg)
}
