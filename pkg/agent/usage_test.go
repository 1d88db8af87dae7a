package agent

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/metrics/metricstest"
	"github.com/dri-cdi/dri-cdi/pkg/usage"
	"github.com/dri-cdi/dri-cdi/pkg/usage/usagetest"
)

// TestAgentServesUsage runs the agent with --usage over a fake proc tree
// whose process holds the tree's render node: the usage metrics name the
// card by its stable ID on the agent's /metrics.
func TestAgentServesUsage(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	igpu := drmtest.IntelIGPU.WithNodes(0, 128)
	tree, err := drmtest.NewTree(t.TempDir(), igpu)
	require.NoError(t, err)
	proc, err := usagetest.New(filepath.Join(t.TempDir(), "proc"))
	require.NoError(t, err)
	require.NoError(t, proc.AddProcess(42, "vainfo", usagetest.CgroupHost))
	require.NoError(t, proc.SetFD(42, 3, filepath.Join(tree.Roots().Dev, "dri", "renderD128"),
		usagetest.FDInfo{Driver: "i915", ClientID: 9, Engines: map[string]uint64{"video": 2e9}}.String()))

	r := runAgent(t, Options{
		Roots: tree.Roots(), Log: testEntry(t),
		Usage: usage.Config{Enabled: true, Interval: 20 * time.Millisecond, ProcRoot: proc.Root, BundleDir: t.TempDir(), IdleAfter: time.Hour},
	}, &fakeBackend{ran: make(chan struct{})})
	want := `dri_cdi_usage_engine_busy_seconds_total{card="` + igpu.ID() + `",container="(host)",driver="i915",engine="video",namespace="(host)",pod="(host)"} 2`
	require.Eventually(t, func() bool {
		_, body := metricstest.Get(t, r.Metrics+"/metrics")
		return strings.Contains(body, want)
	}, wait, tick)
}

func TestAgentUsageOffByDefault(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("dri-cdi-agent", flag.ContinueOnError)
	RegisterCardFlags(fs, &o, ":9470")
	require.NoError(t, fs.Parse(nil))
	require.False(t, o.Usage.Enabled)
	require.Equal(t, usage.DefaultInterval, o.Usage.Interval)
	require.Equal(t, usage.DefaultProcRoot, o.Usage.ProcRoot)

	root := t.TempDir()
	o = Options{
		Roots: drm.Roots{Sysfs: root, Dev: root}, CDIDir: filepath.Join(root, "cdi"),
		ResyncInterval: time.Hour, Log: testEntry(t),
		Usage: usage.Config{Enabled: true, Interval: 0, ProcRoot: "/proc", IdleAfter: time.Minute},
	}
	_, err := New(o)
	require.ErrorContains(t, err, "invalid usage interval")
	require.NoDirExists(t, o.CDIDir)
}
