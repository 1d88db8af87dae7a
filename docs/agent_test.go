package docs

import (
	"regexp"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/metrics"
)

var metricCell = regexp.MustCompile("(?m)^\\| `(dri_cdi_agent_[a-z_]+)` \\|")
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// TestAgentMetricsDocumented checks the agent section of metrics.md
// against the metrics the agent registers.
func TestAgentMetricsDocumented(t *testing.T) {
	var doc []string
	for _, m := range metricCell.FindAllStringSubmatch(section(t, readDoc(t, "metrics.md"), "dri-cdi-agent"), -1) {
		doc = append(doc, m[1])
	}
	sort.Strings(doc)

	descs := make(chan *prometheus.Desc, 1024)
	metrics.NewAgent("test").Registry.Describe(descs)
	close(descs)
	var code []string
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		require.NotNil(t, m, d.String())
		if regexp.MustCompile(`^dri_cdi_agent_`).MatchString(m[1]) {
			code = append(code, m[1])
		}
	}
	sort.Strings(code)
	require.NotEmpty(t, code)
	require.Equal(t, code, doc)
}
