package usage_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/usage"
	"github.com/dri-cdi/dri-cdi/pkg/usage/usagetest"
)

// exposition is what the daemon's /metrics serves for reg.
func exposition(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	var b bytes.Buffer
	for _, f := range families {
		_, err := expfmt.MetricFamilyToText(&b, f)
		require.NoError(t, err)
	}
	return b.String()
}

// TestParseMetricsRoundTrip checks that what dri-cdi top reads back from
// a daemon's metrics is the daemon's snapshot, apart from what metrics do
// not carry (processes, owner IDs, the reader's error counts).
func TestParseMetricsRoundTrip(t *testing.T) {
	src := &claimSource{}
	src.set(map[usage.Names][]usage.Claim{{Namespace: "media", Pod: "jellyfin-0", Container: "jellyfin"}: {
		{Card: "0000:00:02.0", Namespace: "media", Name: "a-share", ShareID: shareA, Shares: 3, CardShares: 4, Memory: 6 << 30},
		{Card: "0000:00:02.0", Namespace: "media", Name: "b-whole"},
		{Card: "0000:00:02.0", Namespace: "monitoring", Name: "c-admin", Admin: true},
	}}, nil)
	r := newRigWith(t, 30*time.Second, src)
	reg := prometheus.NewRegistry()
	reg.MustRegister(usage.NewCollector(r.m))
	r.container(podA, ctrA, "media", "jellyfin-0", "jellyfin")
	require.NoError(t, r.proc.AddProcess(11, "ffmpeg", usagetest.CgroupV2Systemd(podA, ctrA)))
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", i915(1, 100e9)))
	require.NoError(t, r.proc.AddProcess(12, "glmark2", usagetest.CgroupHost))
	require.NoError(t, r.proc.SetFD(12, 5, "/dev/dri/renderD130", usagetest.FDInfo{Driver: "msm", ClientID: 1,
		Engines: map[string]uint64{"gpu": 2e9}, Cycles: map[string]uint64{"gpu": 600e6}, MaxFreqHz: map[string]uint64{"gpu": 600e6}}.String()))
	r.scan(0)
	prev, err := usage.ParseMetrics(strings.NewReader(exposition(t, reg)))
	require.NoError(t, err)
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", i915(1, 105e9)))
	want := r.scan(40 * time.Second)
	cur, err := usage.ParseMetrics(strings.NewReader(exposition(t, reg)))
	require.NoError(t, err)
	require.Equal(t, want.Time.UnixNano()/1e3, cur.Time.UnixNano()/1e3)
	for _, c := range cur.Cards {
		for _, u := range c.Users {
			for _, e := range u.Engines {
				require.Equal(t, -1.0, e.Busy, "one read has no fraction")
			}
		}
	}
	usage.Busy(prev, cur)
	require.Equal(t, 40*time.Second, cur.Interval)
	// Strip what metrics do not carry, then compare.
	for ci := range want.Cards {
		for ui := range want.Cards[ci].Users {
			u := &want.Cards[ci].Users[ui]
			u.Processes, u.Owner = nil, usage.Owner{}
		}
	}
	require.Equal(t, want.Cards, cur.Cards)
	jf := user(cur, "0000:00:02.0", "jellyfin")
	require.Len(t, jf.Claims, 3, "a share, a whole card and admin access read back")
	require.InDelta(t, 5.0/40, engine(jf, usage.ClassVideo).Busy, 1e-9)
	require.True(t, jf.Named)
	require.True(t, user(cur, "226:130", usage.HostLabel).Host)
}

func TestParseMetricsWithoutUsage(t *testing.T) {
	_, err := usage.ParseMetrics(strings.NewReader("# TYPE dri_cdi_agent_registered gauge\ndri_cdi_agent_registered{resource=\"x\"} 1\n"))
	require.ErrorContains(t, err, "is usage on")
	_, err = usage.ParseMetrics(strings.NewReader("garbage{"))
	require.Error(t, err)
}
