package usage_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/usage"
	"github.com/dri-cdi/dri-cdi/pkg/usage/usagetest"
)

func TestCollector(t *testing.T) {
	r := newRig(t, time.Minute)
	c := usage.NewCollector(r.m)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))

	// before the first scan: nothing but the error counter.
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP dri_cdi_usage_scan_errors_total Usage scans that failed (the proc root could not be read).
# TYPE dri_cdi_usage_scan_errors_total counter
dri_cdi_usage_scan_errors_total 0
`)))

	r.container(podA, ctrA, "media", "jellyfin-0", "jellyfin")
	require.NoError(t, r.proc.AddProcess(11, "ffmpeg", usagetest.CgroupV2Systemd(podA, ctrA)))
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", i915(1, 3e9)))
	require.NoError(t, r.proc.AddProcess(12, "glxgears", usagetest.CgroupHost))
	require.NoError(t, r.proc.SetFD(12, 5, "/dev/dri/renderD128", usagetest.FDInfo{Driver: "i915", ClientID: 2, Engines: map[string]uint64{"render": 5e8}}.String()))
	r.scan(0)
	r.scan(2 * time.Minute)

	want := `
# HELP dri_cdi_usage_engine_busy_seconds_total Busy time of the card's engines of one class for the container's DRM clients, exited clients included (engines of capacity N count 1/N).
# TYPE dri_cdi_usage_engine_busy_seconds_total counter
dri_cdi_usage_engine_busy_seconds_total{card="0000:00:02.0",container="(host)",driver="i915",engine="render",namespace="(host)",pod="(host)"} 0.5
dri_cdi_usage_engine_busy_seconds_total{card="0000:00:02.0",container="jellyfin",driver="i915",engine="render",namespace="media",pod="jellyfin-0"} 0
dri_cdi_usage_engine_busy_seconds_total{card="0000:00:02.0",container="jellyfin",driver="i915",engine="video",namespace="media",pod="jellyfin-0"} 3
# HELP dri_cdi_usage_clients Open DRM clients (distinct DRM files) of the container on the card.
# TYPE dri_cdi_usage_clients gauge
dri_cdi_usage_clients{card="0000:00:02.0",container="(host)",driver="i915",namespace="(host)",pod="(host)"} 1
dri_cdi_usage_clients{card="0000:00:02.0",container="jellyfin",driver="i915",namespace="media",pod="jellyfin-0"} 1
# HELP dri_cdi_usage_idle 1 while the container holds an open client of the card and has used none of its engines for --usage-idle-after, else 0.
# TYPE dri_cdi_usage_idle gauge
dri_cdi_usage_idle{card="0000:00:02.0",container="(host)",driver="i915",namespace="(host)",pod="(host)"} 1
dri_cdi_usage_idle{card="0000:00:02.0",container="jellyfin",driver="i915",namespace="media",pod="jellyfin-0"} 1
# HELP dri_cdi_usage_memory_bytes Memory of the container's open DRM clients on the card, per region and kind (total, shared, resident, purgeable, active).
# TYPE dri_cdi_usage_memory_bytes gauge
dri_cdi_usage_memory_bytes{card="0000:00:02.0",container="jellyfin",driver="i915",kind="resident",namespace="media",pod="jellyfin-0",region="system0"} 1.048576e+06
dri_cdi_usage_memory_bytes{card="0000:00:02.0",container="jellyfin",driver="i915",kind="total",namespace="media",pod="jellyfin-0",region="system0"} 2.097152e+06
# HELP dri_cdi_usage_scans_total Completed usage scans.
# TYPE dri_cdi_usage_scans_total counter
dri_cdi_usage_scans_total 2
`
	names := []string{"dri_cdi_usage_engine_busy_seconds_total", "dri_cdi_usage_clients", "dri_cdi_usage_idle", "dri_cdi_usage_memory_bytes", "dri_cdi_usage_scans_total"}
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), names...))
	require.Zero(t, testutil.CollectAndCount(c, "dri_cdi_usage_engine_maxfreq_seconds_total"), "i915 gives no cycles")

	// the pod is deleted: its series go, the host's stay.
	require.NoError(t, r.proc.Exit(11))
	require.NoError(t, os.RemoveAll(filepath.Join(r.bundles, ctrA)))
	for range 3 {
		r.scan(time.Second)
	}
	require.Equal(t, 1, testutil.CollectAndCount(c, "dri_cdi_usage_clients"))
	require.Equal(t, 1, testutil.CollectAndCount(c, "dri_cdi_usage_engine_busy_seconds_total"))
	lint, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	require.Empty(t, lint)
}
