package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/usage"
	"github.com/dri-cdi/dri-cdi/pkg/usage/usagetest"
)

// topNode is a node with an Intel iGPU (real char nodes, hence root), a
// jellyfin container whose ffmpeg holds the render node, a web container
// without a GPU, and a host process on the card node.
func topNode(t *testing.T) []string {
	t.Helper()
	drmtest.SkipUnlessRoot(t)
	tree := drmtest.MustBuild(t, drmtest.IntelIGPU.WithNodes(0, 128))
	dir := t.TempDir()
	proc, err := usagetest.New(filepath.Join(dir, "proc"))
	require.NoError(t, err)
	bundles := filepath.Join(dir, "bundles")
	const (
		pod = "0a1b2c3d-1111-2222-3333-444455556666"
		ctr = "4f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
		web = "5f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
	)
	require.NoError(t, os.MkdirAll(filepath.Join(bundles, ctr), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bundles, ctr, "config.json"), []byte(`{"annotations":{
		"io.kubernetes.cri.sandbox-namespace":"media","io.kubernetes.cri.sandbox-name":"jellyfin-0",
		"io.kubernetes.cri.sandbox-uid":"`+pod+`","io.kubernetes.cri.container-name":"jellyfin"}}`), 0o644))
	dev := tree.Roots().Dev
	require.NoError(t, proc.AddProcess(10, "ffmpeg", usagetest.CgroupV2Systemd(pod, ctr)))
	require.NoError(t, proc.SetFD(10, 5, filepath.Join(dev, "dri", "renderD128"), usagetest.FDInfo{
		Driver: "i915", ClientID: 1, Engines: map[string]uint64{"render": 0, "video": 2e9},
		Memory: map[string]uint64{"resident-system0": 4096}}.String()))
	require.NoError(t, proc.AddProcess(20, "nginx", usagetest.CgroupV2Systemd("9a1b2c3d-1111-2222-3333-444455556666", web)))
	require.NoError(t, proc.SetFD(20, 1, "/dev/null", "pos:\t0\n"))
	require.NoError(t, proc.AddProcess(30, "Xorg", usagetest.CgroupHost))
	require.NoError(t, proc.SetFD(30, 7, filepath.Join(dev, "dri", "card0"), usagetest.FDInfo{
		Driver: "i915", ClientID: 2, Engines: map[string]uint64{"render": 1e9}}.String()))
	return append(rootFlagsOf(tree), "--proc-root", proc.Root, "--bundle-dir", bundles, "--interval", "10ms", "--once")
}

func TestTopJSON(t *testing.T) {
	flags := topNode(t)
	r := run(t, nil, append([]string{"top", "-o", "json"}, flags...)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var snap usage.Snapshot
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &snap))
	require.Len(t, snap.Cards, 1)
	card := snap.Cards[0]
	require.Equal(t, "0000:00:02.0", card.ID)
	require.Equal(t, "i915", card.Driver)
	require.Len(t, card.Users, 2, "the pod without a GPU shows nothing")
	host, jf := card.Users[0], card.Users[1]
	require.True(t, host.Host)
	require.Equal(t, []usage.Process{{PID: 30, Comm: "Xorg"}}, host.Processes)
	require.Equal(t, usage.Names{Namespace: "media", Pod: "jellyfin-0", Container: "jellyfin"}, jf.Names)
	require.Equal(t, 1, jf.Clients)
	require.Equal(t, []usage.Process{{PID: 10, Comm: "ffmpeg"}}, jf.Processes)
	require.Equal(t, []usage.EngineUsage{
		{Class: usage.ClassRender, BusySeconds: 0, Busy: 0, HasBusy: true},
		{Class: usage.ClassVideo, BusySeconds: 2, Busy: 0, HasBusy: true},
	}, jf.Engines)
	require.Equal(t, []usage.MemoryUsage{{Region: "system0", Kind: usage.KindResident, Bytes: 4 << 20}}, jf.Memory)
}

func TestTopText(t *testing.T) {
	flags := topNode(t)
	r := run(t, nil, append([]string{"top"}, flags...)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.NotContains(t, r.stdout, "\x1b[", "--once prints no terminal control")
	lines := strings.Split(r.stdout, "\n")
	require.Contains(t, lines, "CARD 0000:00:02.0 (i915)")
	var jf, host string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "media "):
			jf = l
		case strings.HasPrefix(l, "(host) "):
			host = l
		}
	}
	require.Equal(t, []string{"media", "jellyfin-0", "jellyfin", "1", "0%", "0%", "-", "-", "-", "-", "4.0MiB", "0s", "ffmpeg(10)"}, strings.Fields(jf))
	require.Equal(t, []string{"(host)", "-", "-", "1", "0%", "-", "-", "-", "-", "-", "-", "0s", "Xorg(30)"}, strings.Fields(host))
	require.NotContains(t, r.stdout, "nginx")
}

func TestTopFlags(t *testing.T) {
	r := run(t, nil, "top", "--interval", "0s", "--once")
	require.Equal(t, ExitUsage, r.code)
	require.Contains(t, r.stderr, "-interval must be positive")
	r = run(t, nil, "top", "--proc-root", filepath.Join(t.TempDir(), "none"), "--once", "--interval", "1ms")
	require.Equal(t, ExitError, r.code)
	require.Contains(t, r.stderr, "scan proc root")
}

// TestTopFromMetrics reads an agent's /metrics twice: the busy % is the
// growth of the busy seconds between its two scans.
func TestTopFromMetrics(t *testing.T) {
	page := func(ts, busy int) string {
		who := `card="0000:00:02.0",container="jellyfin",driver="i915",namespace="media",pod="jellyfin-0"`
		return fmt.Sprintf(`# TYPE dri_cdi_usage_last_scan_timestamp_seconds gauge
dri_cdi_usage_last_scan_timestamp_seconds %d
# TYPE dri_cdi_usage_engine_busy_seconds_total counter
dri_cdi_usage_engine_busy_seconds_total{%s,engine="video"} %d
# TYPE dri_cdi_usage_clients gauge
dri_cdi_usage_clients{%s} 1
`, ts, who, busy, who)
	}
	var reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if reads.Add(1) == 1 {
			fmt.Fprint(w, page(100, 10))
			return
		}
		fmt.Fprint(w, page(110, 15))
	}))
	defer srv.Close()
	r := run(t, nil, "top", "--once", "-o", "json", "--interval", "1ms", "--metrics-url", srv.URL)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var snap usage.Snapshot
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &snap))
	require.Len(t, snap.Cards, 1)
	u := snap.Cards[0].Users[0]
	require.Equal(t, usage.Names{Namespace: "media", Pod: "jellyfin-0", Container: "jellyfin"}, u.Names)
	require.Equal(t, []usage.EngineUsage{{Class: usage.ClassVideo, BusySeconds: 15, Busy: 0.5, HasBusy: true}}, u.Engines)

	reads.Store(0)
	r = run(t, nil, "top", "--once", "--interval", "1ms", "--metrics-url", srv.URL)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "50%")

	srv.Close()
	r = run(t, nil, "top", "--once", "--interval", "1ms", "--metrics-url", srv.URL)
	require.Equal(t, ExitError, r.code)
	require.Contains(t, r.stderr, "read metrics")
}

// TestTopSharersFromMetrics reads dri-cdi-dra's /metrics of a card two
// media servers share: each row shows its own claim and what it was
// promised next to what it uses; the host's row has no claim.
func TestTopSharersFromMetrics(t *testing.T) {
	page := func(ts, plex, jellyfin int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "# TYPE dri_cdi_usage_last_scan_timestamp_seconds gauge\ndri_cdi_usage_last_scan_timestamp_seconds %d\n", ts)
		b.WriteString("# TYPE dri_cdi_usage_engine_busy_seconds_total counter\n")
		row := func(pod, ctr string) string {
			return fmt.Sprintf(`card="0000:00:02.0",container=%q,driver="i915",namespace="media",pod=%q`, ctr, pod)
		}
		fmt.Fprintf(&b, "dri_cdi_usage_engine_busy_seconds_total{%s,engine=\"video\"} %d\n", row("plex-0", "plex"), plex)
		fmt.Fprintf(&b, "dri_cdi_usage_engine_busy_seconds_total{%s,engine=\"video\"} %d\n", row("jellyfin-0", "jellyfin"), jellyfin)
		fmt.Fprintf(&b, "dri_cdi_usage_engine_busy_seconds_total{%s,engine=\"render\"} 0\n", `card="0000:00:02.0",container="(host)",driver="i915",namespace="(host)",pod="(host)"`)
		b.WriteString("# TYPE dri_cdi_usage_claim_shares gauge\n")
		fmt.Fprintf(&b, "dri_cdi_usage_claim_shares{%s,claim_namespace=\"media\",claim=\"plex-0-gpu-x7k2p\",share_id=\"s-1\"} 1\n", row("plex-0", "plex"))
		fmt.Fprintf(&b, "dri_cdi_usage_claim_shares{%s,claim_namespace=\"media\",claim=\"jellyfin-0-gpu-q9z4m\",share_id=\"s-2\"} 1\n", row("jellyfin-0", "jellyfin"))
		b.WriteString("# TYPE dri_cdi_usage_claim_memory_bytes gauge\n")
		fmt.Fprintf(&b, "dri_cdi_usage_claim_memory_bytes{%s,claim_namespace=\"media\",claim=\"plex-0-gpu-x7k2p\",share_id=\"s-1\"} 2147483648\n", row("plex-0", "plex"))
		b.WriteString("# TYPE dri_cdi_usage_claim_promised_ratio gauge\n")
		fmt.Fprintf(&b, "dri_cdi_usage_claim_promised_ratio{%s,claim_namespace=\"media\",claim=\"plex-0-gpu-x7k2p\",share_id=\"s-1\"} 0.5\n", row("plex-0", "plex"))
		fmt.Fprintf(&b, "dri_cdi_usage_claim_promised_ratio{%s,claim_namespace=\"media\",claim=\"jellyfin-0-gpu-q9z4m\",share_id=\"s-2\"} 0.5\n", row("jellyfin-0", "jellyfin"))
		return b.String()
	}
	var reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if reads.Add(1) == 1 {
			fmt.Fprint(w, page(100, 10, 10))
			return
		}
		fmt.Fprint(w, page(110, 17, 11))
	}))
	defer srv.Close()
	r := run(t, nil, "top", "--once", "--interval", "1ms", "--metrics-url", srv.URL)
	require.Equal(t, ExitOK, r.code, r.stderr)
	rows := map[string][]string{}
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]+" "+f[1]] = f
		}
	}
	require.Equal(t, []string{"NAMESPACE", "POD", "CONTAINER", "CLAIM", "PROMISED", "CLIENTS"}, rows["NAMESPACE POD"][:6])
	require.Equal(t, []string{"media", "plex-0", "plex", "media/plex-0-gpu-x7k2p", "50%", "(1/2)", "2.0GiB", "0", "-", "70%"}, rows["media plex-0"][:10])
	require.Equal(t, []string{"media", "jellyfin-0", "jellyfin", "media/jellyfin-0-gpu-q9z4m", "50%", "(1/2)", "0", "-", "10%"}, rows["media jellyfin-0"][:9])
	require.Equal(t, []string{"(host)", "-", "-", "-", "-", "0"}, rows["(host) -"][:6])
}
