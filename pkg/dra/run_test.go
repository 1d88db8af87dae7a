package dra

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/agent"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/dra/dratest"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/metrics/metricstest"
)

// devicesOf is the node's slice's devices by name, nil until there is
// exactly one slice.
func devicesOf(t *testing.T, e *env) map[string]draapi.Device {
	l, err := listSlices(e.client)
	require.NoError(t, err)
	if len(l) != 1 {
		return nil
	}
	out := map[string]draapi.Device{}
	for _, d := range l[0].Spec.Devices {
		out[d.Name] = d
	}
	return out
}

// plugin is dri-cdi-dra (Run) running on a fake tree.
type plugin struct {
	d    *Driver
	sock string // its registration socket
	base string // its metrics server's URL
	// stop ends Run and requires it to end without an error; it runs at
	// the end of the test too.
	stop func()
}

// runPlugin runs dri-cdi-dra on tree with a metrics server on a free
// loopback port and returns once its registration socket exists.
func runPlugin(t *testing.T, tree *drmtest.Tree, cdiDir, data, reg string, client *fake.Clientset) *plugin {
	t.Helper()
	addr := make(chan net.Addr, 1)
	drivers := make(chan *Driver, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, RunOptions{
			Agent: agent.Options{Roots: tree.Roots(), CDIDir: cdiDir, ResyncInterval: time.Hour, MetricsAddr: "127.0.0.1:0",
				OnMetricsListen: func(a net.Addr) { addr <- a }, Log: testEntry(t), Version: "test"},
			NodeName: node, PluginDataDir: data, RegistrarDir: reg, API: apiOf(client),
			OnDriver: func(d *Driver) { drivers <- d },
		})
	}()
	p := &plugin{}
	p.stop = sync.OnceFunc(func() { cancel(); require.NoError(t, <-done) })
	t.Cleanup(p.stop)
	p.d = <-drivers
	p.base = "http://" + (<-addr).String()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	var err error
	p.sock, err = dratest.WaitSocket(wctx, reg)
	require.NoError(t, err)
	return p
}

// register registers p with a fake kubelet, as the kubelet does, and
// returns once p is ready.
func (p *plugin) register(t *testing.T, client *fake.Clientset) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k, err := dratest.Register(ctx, p.sock, "")
	require.NoError(t, err)
	t.Cleanup(k.Close)
	require.Eventually(t, func() bool { c, _ := metricstest.Get(t, p.base+"/readyz"); return c == http.StatusOK }, 30*time.Second, time.Millisecond)
	return &env{t: t, client: client, plugin: k, d: p.d}
}

// Run is the agent loop on a fixture tree publishing to the plugin: the
// cards' specs are written, the slice follows hotplug and unbind, a
// prepared claim resolves to the spec the loop wrote, and /readyz and
// /metrics tell the state.
func TestRunFollowsTheNode(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	tree := drmtest.MustBuild(t, hybrid...)
	cdiDir, data, reg, client := t.TempDir(), kubelettest.ShortDir(t), kubelettest.ShortDir(t), fakeClient()
	p := runPlugin(t, tree, cdiDir, data, reg, client)
	d, base := p.d, p.base
	code, body := metricstest.Get(t, base+"/readyz")
	if d.Ready() != nil {
		require.Equal(t, http.StatusServiceUnavailable, code, body)
	}
	e := p.register(t, client)

	require.Eventually(t, func() bool { return len(devicesOf(t, e)) == 2 }, 30*time.Second, time.Millisecond)
	require.Contains(t, devicesOf(t, e), "pci-0000-00-02-0")
	require.Contains(t, devicesOf(t, e), "pci-0000-03-00-0")

	// The prepared CDI name is the spec the loop wrote.
	c := e.claim("c", "uid-c", result("gpu", "pci-0000-00-02-0"))
	got := e.prepare(c)
	require.Equal(t, []string{"dri-cdi.dev/gpu=0000:00:02.0"}, cdiIDs(got["uid-c"]))
	name, err := cdi.FileName(cdi.DefaultKind, "0000:00:02.0")
	require.NoError(t, err)
	spec, err := os.ReadFile(filepath.Join(cdiDir, name))
	require.NoError(t, err)
	require.Contains(t, string(spec), `"0000:00:02.0"`)

	// Hotplug.
	xe := drmtest.IntelXe.WithPCI("0000:05:00.0").WithNodes(4, 130)
	require.NoError(t, tree.Add(xe))
	require.Eventually(t, func() bool { _, ok := devicesOf(t, e)["pci-0000-05-00-0"]; return ok }, 30*time.Second, time.Millisecond)
	// Unbind: the card stays, tainted; prepare refuses it.
	require.NoError(t, tree.Unbind("0000:03:00.0"))
	require.Eventually(t, func() bool { return len(devicesOf(t, e)["pci-0000-03-00-0"].Taints) == 1 }, 30*time.Second, time.Millisecond)
	sick := e.claim("sick", "uid-sick", result("gpu", "pci-0000-03-00-0"))
	require.Contains(t, e.prepare(sick)["uid-sick"].Error, "card unavailable")
	// Rebind: healthy again.
	require.NoError(t, tree.Rebind("0000:03:00.0"))
	require.Eventually(t, func() bool {
		dev, ok := devicesOf(t, e)["pci-0000-03-00-0"]
		return ok && len(dev.Taints) == 0
	}, 30*time.Second, time.Millisecond)
	// Removal: the card leaves the slice.
	require.NoError(t, tree.Remove("0000:05:00.0"))
	// (devicesOf is nil while the slice is being replaced: not a removal.)
	require.Eventually(t, func() bool {
		devs := devicesOf(t, e)
		_, ok := devs["pci-0000-05-00-0"]
		return len(devs) == 2 && !ok
	}, 30*time.Second, time.Millisecond)

	_, metrics := metricstest.Get(t, base+"/metrics")
	for _, m := range []string{`dri_cdi_dra_prepare_claims_total{result="success"} 1`, `dri_cdi_dra_prepare_claims_total{result="unhealthy"} 1`,
		`dri_cdi_dra_prepared_claims 1`, `dri_cdi_dra_devices{health="healthy"} 2`, `dri_cdi_agent_discoveries_total{trigger="startup"} 1`} {
		require.Contains(t, metrics, m)
	}
}

func TestRunChecksItsOptions(t *testing.T) {
	// The driver's options are checked by NewDriver, once the loop's are.
	loop := agent.Options{Roots: drm.Roots{Sysfs: t.TempDir(), Dev: t.TempDir()}, CDIDir: t.TempDir(), ResyncInterval: time.Hour, Log: testEntry(t)}
	err := Run(context.Background(), RunOptions{Agent: loop, API: apiOf(fakeClient())})
	require.ErrorContains(t, err, "node name is empty")
	err = Run(context.Background(), RunOptions{Agent: agent.Options{Log: testEntry(t)}, NodeName: node, Kubeconfig: "/nonexistent/kubeconfig"})
	require.ErrorContains(t, err, `kubeconfig "/nonexistent/kubeconfig"`)

	// A config the DRA plugin would share cards by is checked on its
	// path too: shares 0 or over 1000 are refused before anything runs.
	for _, shares := range []string{"0", "1001"} {
		path := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(path, []byte("pools:\n- resource: dri-cdi.dev/i915\n  drivers: [i915]\n  shares: "+shares+"\n"), 0o600))
		bad := loop
		bad.ConfigPath = path
		err = Run(context.Background(), RunOptions{Agent: bad, NodeName: node, API: apiOf(fakeClient())})
		require.ErrorContains(t, err, path)
		require.ErrorContains(t, err, "pools[0].shares: must be between 1 and 1000")
	}
}

// A plugin data dir that does not exist yet (a fresh node, or a
// manifest whose hostPath is not DirectoryOrCreate) is created, 0750, and
// the plugin registers; one that cannot be created is named, with the
// reason, by /readyz while the start is retried.
func TestRunCreatesItsPluginDataDir(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	tree := drmtest.MustBuild(t, drmtest.IntelIGPU)
	data := filepath.Join(kubelettest.ShortDir(t), "plugins", "dri-cdi.dev")
	reg, client := kubelettest.ShortDir(t), fakeClient()
	p := runPlugin(t, tree, t.TempDir(), data, reg, client)
	p.register(t, client)
	st, err := os.Stat(data)
	require.NoError(t, err)
	require.True(t, st.IsDir())
	require.Equal(t, os.FileMode(pluginDataDirMode), st.Mode().Perm())

	// A file where the directory belongs: never started, and /readyz
	// says why.
	blocked := filepath.Join(kubelettest.ShortDir(t), "file")
	require.NoError(t, os.WriteFile(blocked, nil, 0o600))
	addr := make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, RunOptions{
			Agent: agent.Options{Roots: tree.Roots(), CDIDir: t.TempDir(), ResyncInterval: time.Hour, MetricsAddr: "127.0.0.1:0",
				OnMetricsListen: func(a net.Addr) { addr <- a }, Log: testEntry(t)},
			NodeName: node, PluginDataDir: filepath.Join(blocked, "dri-cdi.dev"), RegistrarDir: kubelettest.ShortDir(t), API: apiOf(fakeClient()),
		})
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	base := "http://" + (<-addr).String()
	var body string
	require.Eventually(t, func() bool {
		var code int
		code, body = metricstest.Get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "create plugin data dir")
	}, 30*time.Second, 10*time.Millisecond)
	require.Contains(t, body, filepath.Join(blocked, "dri-cdi.dev"))
	require.Contains(t, body, "not a directory")
}
