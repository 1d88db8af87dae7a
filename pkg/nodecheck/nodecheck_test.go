package nodecheck

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/doctor"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// secret stands for a registry credential in the node's containerd
// config; no served report may ever carry it.
const secret = "hunter2-registry-password"

// fixture is a node with two Intel cards, their CDI specs as the agent
// writes them, a kubelet device plugin socket and a containerd config
// holding a credential.
type fixture struct {
	roots                 drm.Roots
	cdiDir, kubeletDir    string
	podResources, nriSock string
	containerdConfig      string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	drmtest.SkipUnlessRoot(t)
	root, err := os.MkdirTemp("", "nc")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	tree := drmtest.MustBuild(t, drmtest.GPU{Driver: "i915", PCIAddress: "0000:00:02.0", Vendor: "8086", Device: "46a6", Card: 1, Render: 128},
		drmtest.GPU{Driver: "xe", PCIAddress: "0000:03:00.0", Vendor: "8086", Device: "e20b", Card: 2, Render: 129})
	f := fixture{
		roots:            tree.Roots(),
		cdiDir:           filepath.Join(root, "cdi"),
		kubeletDir:       filepath.Join(root, "dp"),
		podResources:     filepath.Join(root, "pr.sock"),
		nriSock:          filepath.Join(root, "nri.sock"),
		containerdConfig: filepath.Join(root, "config.toml"),
	}
	inv, err := drm.Discover(f.roots)
	require.NoError(t, err)
	w, err := cdi.NewWriter(f.cdiDir, cdi.DefaultKind)
	require.NoError(t, err)
	_, err = w.Sync(inv.Cards)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(f.kubeletDir, 0o755))
	for _, p := range []string{filepath.Join(f.kubeletDir, "kubelet.sock"), f.podResources, f.nriSock} {
		l, err := net.Listen("unix", p)
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
	}
	require.NoError(t, os.WriteFile(f.containerdConfig, []byte(`version = 3
[plugins.'io.containerd.cri.v1.images'.registry.configs.'registry.example'.auth]
  password = '`+secret+`'
`), 0o600))
	return f
}

func get(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return rec.Code, string(body)
}

func names(rep *doctor.Report) map[string]doctor.Status {
	out := map[string]doctor.Status{}
	for _, r := range rep.Results {
		if out[r.Name] != doctor.Fail {
			out[r.Name] = r.Status
		}
	}
	return out
}

func TestAgentReport(t *testing.T) {
	f := newFixture(t)
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics") })
	h := Mount(next, Agent(f.roots, f.cdiDir, cdi.DefaultKind, f.kubeletDir, true))

	code, body := get(t, h, "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "metrics", body, "every other path stays the metrics server's")

	code, body = get(t, h, "/doctor?format=json")
	require.Equal(t, http.StatusOK, code, body)
	var rep doctor.Report
	require.NoError(t, json.Unmarshal([]byte(body), &rep))
	require.Equal(t, map[string]doctor.Status{
		"kubelet.device-plugins": doctor.OK,
		"devices":                doctor.OK,
		"cdi.specs":              doctor.OK,
		"cdi.cards":              doctor.OK,
		"cdi.nodes":              doctor.OK,
	}, names(&rep), body)
	require.False(t, rep.Failed)
	require.Equal(t, "checked by dri-cdi-agent from its container", rep.Scope)
	require.Contains(t, strings.Join(rep.NotChecked, "\n"), "containerd config")

	code, text := get(t, h, "/doctor")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, text, "0000:00:02.0 (i915")
	require.Contains(t, text, "not checked: the containerd config")
}

func TestNRIReport(t *testing.T) {
	f := newFixture(t)
	h := NRI(f.cdiDir, cdi.DefaultKind, f.podResources, f.nriSock)
	_, body := get(t, h, "/doctor?format=json")
	var rep doctor.Report
	require.NoError(t, json.Unmarshal([]byte(body), &rep))
	require.Equal(t, map[string]doctor.Status{
		"kubelet.pod-resources": doctor.OK,
		"containerd.nri.socket": doctor.OK,
		"cdi.specs":             doctor.OK,
		"cdi.nodes":             doctor.OK,
	}, names(&rep), body)

	// A missing socket is a failure the report names.
	require.NoError(t, os.Remove(f.nriSock))
	h = NRI(f.cdiDir, cdi.DefaultKind, f.podResources, f.nriSock)
	_, text := get(t, h, "/doctor")
	require.Contains(t, text, "FAIL  containerd.nri.socket")
	require.Contains(t, text, f.nriSock+" does not exist")
}

// TestNeverReadsContainerdConfig gives the handler a containerd config
// that holds a credential: the served report must neither check the
// config nor carry any of it.
func TestNeverReadsContainerdConfig(t *testing.T) {
	f := newFixture(t)
	opts := doctor.DefaultOptions()
	opts.SysfsRoot, opts.DevRoot, opts.CDIDir, opts.KubeletDir = f.roots.Sysfs, f.roots.Dev, f.cdiDir, f.kubeletDir
	opts.PodResourcesSocket, opts.NRISocket = f.podResources, f.nriSock
	opts.ContainerdConfig = f.containerdConfig
	every := doctor.Scope{Name: "test", DevicePlugins: true, PodResources: true, NRISocket: true, Devices: true, CDISpecs: true}
	for _, format := range []string{"text", "json"} {
		_, body := get(t, New(opts, every), "/doctor?format="+format)
		require.NotContains(t, body, secret)
		require.NotContains(t, body, "containerd.config")
		require.NotContains(t, body, f.containerdConfig)
	}
}

func TestRequests(t *testing.T) {
	f := newFixture(t)
	h := Agent(f.roots, f.cdiDir, cdi.DefaultKind, f.kubeletDir, false)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/doctor", nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)

	code, body := get(t, h, "/doctor?format=yaml")
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "invalid format yaml: want text or json")

	// Without the device plugin (DRA mode) its socket is not checked.
	_, body = get(t, h, "/doctor")
	require.NotContains(t, body, "kubelet.device-plugins")
}

// TestReuse: within ReuseFor every request gets the same report, so
// requests cannot keep the node busy; after it the checks run again.
func TestReuse(t *testing.T) {
	f := newFixture(t)
	h := Agent(f.roots, f.cdiDir, cdi.DefaultKind, f.kubeletDir, true)
	now := time.Unix(1000, 0)
	h.now = func() time.Time { return now }
	_, before := get(t, h, "/doctor")
	require.Contains(t, before, "OK    kubelet.device-plugins")
	require.NoError(t, os.Remove(filepath.Join(f.kubeletDir, "kubelet.sock")))

	now = now.Add(ReuseFor - time.Millisecond)
	_, same := get(t, h, "/doctor")
	require.Equal(t, before, same)

	now = now.Add(time.Millisecond)
	_, after := get(t, h, "/doctor")
	require.Contains(t, after, "FAIL  kubelet.device-plugins")
}
