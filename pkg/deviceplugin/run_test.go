package deviceplugin_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/agent"
	"github.com/dri-cdi/dri-cdi/pkg/agent/agenttest"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/logging/loggingtest"
	"github.com/dri-cdi/dri-cdi/pkg/metrics/metricstest"
)

const (
	wait = agenttest.Wait
	tick = 2 * time.Millisecond
)

func testEntry(t testing.TB) *logrus.Entry {
	return loggingtest.New(t, logrus.TraceLevel)
}

func TestRunRejectsBadInputBeforeTouchingAnything(t *testing.T) {
	badConfig := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(badConfig, []byte("pools:\n- resource: gpu.intel.com/i915\n  drivers: [i915]\n  replicas: 0\n"), 0o600))
	unknownField := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(unknownField, []byte("pools:\n- resource: gpu.intel.com/i915\n  driver: [i915]\n"), 0o600))

	tests := map[string]struct {
		mutate  func(o *deviceplugin.RunOptions)
		wantErr []string
	}{
		"invalid config value": {mutate: func(o *deviceplugin.RunOptions) { o.Agent.ConfigPath = badConfig }, wantErr: []string{badConfig, "pools[0].replicas: must be >= 1"}},
		"unknown config field": {mutate: func(o *deviceplugin.RunOptions) { o.Agent.ConfigPath = unknownField }, wantErr: []string{"pools[0].driver: unknown field"}},
		"missing config":       {mutate: func(o *deviceplugin.RunOptions) { o.Agent.ConfigPath = "/nonexistent/dri-cdi.yaml" }, wantErr: []string{"/nonexistent/dri-cdi.yaml"}},
		"bad delivery":         {mutate: func(o *deviceplugin.RunOptions) { o.Backend.Delivery = "cdi" }, wantErr: []string{`invalid delivery mode "cdi"`}},
		"bad resync":           {mutate: func(o *deviceplugin.RunOptions) { o.Agent.ResyncInterval = 0 }, wantErr: []string{"invalid resync interval"}},
		"empty cdi dir":        {mutate: func(o *deviceplugin.RunOptions) { o.Agent.CDIDir = "" }, wantErr: []string{"CDI dir is empty"}},
		"bad metrics address":  {mutate: func(o *deviceplugin.RunOptions) { o.Agent.MetricsAddr = "nonsense" }, wantErr: []string{`metrics address "nonsense"`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			kubelet := kubelettest.ShortDir(t)
			o := deviceplugin.RunOptions{
				Agent: agent.Options{
					Roots:          drmtest.MustBuild(t).Roots(),
					CDIDir:         filepath.Join(root, "cdi"),
					ResyncInterval: time.Hour,
					Log:            testEntry(t),
				},
				Backend: deviceplugin.BackendOptions{KubeletDir: kubelet, Delivery: "cdi-cri"},
			}
			tc.mutate(&o)
			err := deviceplugin.Run(context.Background(), o)
			require.Error(t, err)
			for _, s := range tc.wantErr {
				require.Contains(t, err.Error(), s)
			}
			require.NoDirExists(t, filepath.Join(root, "cdi"))
			entries, err := os.ReadDir(kubelet)
			require.NoError(t, err)
			require.Empty(t, entries)
		})
	}
}

// TestRunFailsWhenSpecsCannotBeWritten covers a first pass that fails
// while the metrics server already runs: Run must return the error, not
// hang, and leave no socket behind.
func TestRunFailsWhenSpecsCannotBeWritten(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notADir, nil, 0o600))
	kubelet := kubelettest.ShortDir(t)
	done := make(chan error, 1)
	go func() {
		done <- deviceplugin.Run(context.Background(), deviceplugin.RunOptions{
			Agent: agent.Options{
				Roots: drmtest.MustBuild(t, drmtest.IntelIGPU).Roots(), CDIDir: filepath.Join(notADir, "cdi"),
				MetricsAddr: "127.0.0.1:0", ResyncInterval: time.Hour, Log: testEntry(t),
			},
			Backend: deviceplugin.BackendOptions{KubeletDir: kubelet, Delivery: "cdi-cri"},
		})
	}()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "first sync")
		require.ErrorContains(t, err, "CDI")
	case <-time.After(wait):
		t.Fatal("Run did not return")
	}
	entries, err := os.ReadDir(kubelet)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// runAgent runs dri-cdi-agent (deviceplugin.Run) with o until the test
// ends (agenttest.Serve). Left unset, the CDI dir is a fresh temp dir, the
// delivery cdi-cri, and the full rescan an hour away: the tests make
// their changes seen through the watchers.
func runAgent(t *testing.T, o deviceplugin.RunOptions) *agenttest.Running {
	t.Helper()
	if o.Agent.CDIDir == "" {
		o.Agent.CDIDir = filepath.Join(t.TempDir(), "cdi")
	}
	if o.Backend.Delivery == "" {
		o.Backend.Delivery = "cdi-cri"
	}
	if o.Agent.ResyncInterval == 0 {
		o.Agent.ResyncInterval = time.Hour
	}
	o.Agent.MetricsAddr = "127.0.0.1:0"
	return agenttest.Serve(t, func(ctx context.Context, onListen func(net.Addr)) error {
		o.Agent.OnMetricsListen = onListen
		return deviceplugin.Run(ctx, o)
	})
}

// node is a running agent on a fake tree with a fake kubelet.
type node struct {
	*agenttest.Running
	tree    *drmtest.Tree
	kubelet *kubelettest.Kubelet
	cdiDir  string
}

func startNode(t *testing.T, delivery, config string, gpus ...drmtest.GPU) *node {
	t.Helper()
	drmtest.SkipUnlessRoot(t)
	tree, err := drmtest.NewTree(t.TempDir(), gpus...)
	require.NoError(t, err)
	k, err := kubelettest.Start(kubelettest.ShortDir(t))
	require.NoError(t, err)
	t.Cleanup(k.Stop)
	n := &node{tree: tree, kubelet: k, cdiDir: filepath.Join(t.TempDir(), "cdi")}
	cfgPath := ""
	if config != "" {
		cfgPath = filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(cfgPath, []byte(config), 0o600))
	}
	n.Running = runAgent(t, deviceplugin.RunOptions{
		Agent:   agent.Options{Roots: tree.Roots(), CDIDir: n.cdiDir, ConfigPath: cfgPath, Log: testEntry(t)},
		Backend: deviceplugin.BackendOptions{KubeletDir: k.Dir(), Delivery: delivery},
	})
	return n
}

func (n *node) endpoint(t *testing.T, resource string) *kubelettest.Endpoint {
	t.Helper()
	ok := assert.Eventually(t, func() bool {
		e := n.kubelet.Endpoint(resource)
		return e != nil && e.Updates() > 0
	}, wait, tick)
	e := n.kubelet.Endpoint(resource)
	if !ok {
		if e == nil {
			t.Fatalf("%s never registered (registrations: %v)", resource, n.kubelet.Registrations())
		}
		t.Fatalf("%s registered but sent no list; stream error: %v", resource, e.Err())
	}
	return e
}

func (n *node) specFile(t *testing.T, id string) string {
	name, err := cdi.FileName(cdi.DefaultKind, id)
	require.NoError(t, err)
	return filepath.Join(n.cdiDir, name)
}

func allocate(t *testing.T, e *kubelettest.Endpoint, ids ...string) (*pluginapi.ContainerAllocateResponse, error) {
	resp, err := e.Client.Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}},
	})
	if err != nil {
		return nil, err
	}
	return resp.ContainerResponses[0], nil
}

func TestAgentServesCardsFromATree(t *testing.T) {
	igpu := drmtest.IntelIGPU.WithNodes(1, 128)
	amd := drmtest.AMDdGPU.WithNodes(2, 129)
	n := startNode(t, "cdi-cri", "", drmtest.Simpledrm, igpu, amd)

	i915 := n.endpoint(t, "dri-cdi.dev/i915")
	require.Equal(t, map[string]string{igpu.ID(): pluginapi.Healthy}, i915.Health())
	amdEP := n.endpoint(t, "dri-cdi.dev/amdgpu")
	require.Equal(t, []*pluginapi.Device{{ID: amd.ID(), Health: pluginapi.Healthy, Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: 0}}}}}, amdEP.Devices())
	require.Nil(t, n.kubelet.Endpoint("dri-cdi.dev/simple-framebuffer"), "display-only cards are not advertised")

	resp, err := allocate(t, i915, igpu.ID())
	require.NoError(t, err)
	require.Equal(t, []*pluginapi.CDIDevice{{Name: "dri-cdi.dev/gpu=" + igpu.ID()}}, resp.CdiDevices)
	devs, err := cdi.LoadDevices(n.cdiDir, cdi.DefaultKind)
	require.NoError(t, err)
	require.Contains(t, devs, igpu.ID(), "the CDI name must resolve")
	require.NotContains(t, devs, drmtest.Simpledrm.ID())

	require.Eventually(t, func() bool { code, _ := metricstest.Get(t, n.Metrics+"/readyz"); return code == http.StatusOK }, wait, tick)
	_, body := metricstest.Get(t, n.Metrics+"/metrics")
	require.Contains(t, body, `dri_cdi_agent_devices{health="healthy",resource="dri-cdi.dev/i915"} 1`)
	require.Contains(t, body, `dri_cdi_agent_allocations_total{resource="dri-cdi.dev/i915"} 1`)
	require.Contains(t, body, `dri_cdi_agent_registered{resource="dri-cdi.dev/amdgpu"} 1`)
}

func TestAgentDeliveryModes(t *testing.T) {
	igpu := drmtest.IntelIGPU.WithNodes(0, 128)
	for _, mode := range []string{"nri", "device-specs"} {
		t.Run(mode, func(t *testing.T) {
			n := startNode(t, mode, "", igpu)
			ep := n.endpoint(t, "dri-cdi.dev/i915")
			resp, err := allocate(t, ep, igpu.ID())
			require.NoError(t, err)
			require.Empty(t, resp.CdiDevices)
			require.Len(t, resp.Annotations, 1)
			if mode == "nri" {
				require.Empty(t, resp.Devices)
				return
			}
			var paths []string
			for _, d := range resp.Devices {
				require.Equal(t, "rw", d.Permissions)
				require.True(t, strings.HasPrefix(d.HostPath, n.tree.Roots().Dev), d.HostPath)
				paths = append(paths, d.ContainerPath)
			}
			require.Contains(t, paths, "/dev/dri/card0")
			require.Contains(t, paths, "/dev/dri/renderD128")
		})
	}
}

func TestAgentHotplug(t *testing.T) {
	igpu := drmtest.IntelIGPU.WithNodes(0, 128)
	n := startNode(t, "cdi-cri", "", igpu)
	i915 := n.endpoint(t, "dri-cdi.dev/i915")

	// A new driver's first card: its spec exists by the time it is listed.
	xe := drmtest.IntelXe.WithNodes(1, 129)
	require.NoError(t, n.tree.Add(xe))
	xeEP := n.endpoint(t, "dri-cdi.dev/xe")
	require.FileExists(t, n.specFile(t, xe.ID()))
	require.Equal(t, map[string]string{xe.ID(): pluginapi.Healthy}, xeEP.Health())

	// A second card of a served driver.
	igpu2 := drmtest.IntelIGPU.WithPCI("0000:00:03.0").WithNodes(2, 130)
	require.NoError(t, n.tree.Add(igpu2))
	require.Eventually(t, func() bool { return len(i915.Devices()) == 2 }, wait, tick)
	require.FileExists(t, n.specFile(t, igpu2.ID()))

	// Unbind: listed Unhealthy, spec kept, allocation refused.
	require.NoError(t, n.tree.Unbind(igpu2.ID()))
	require.Eventually(t, func() bool { return i915.Health()[igpu2.ID()] == pluginapi.Unhealthy }, wait, tick)
	require.FileExists(t, n.specFile(t, igpu2.ID()))
	_, err := allocate(t, i915, igpu2.ID())
	require.ErrorContains(t, err, "unhealthy device")

	// Rebind: Healthy again.
	require.NoError(t, n.tree.Rebind(igpu2.ID()))
	require.Eventually(t, func() bool { return i915.Health()[igpu2.ID()] == pluginapi.Healthy }, wait, tick)
	_, err = allocate(t, i915, igpu2.ID())
	require.NoError(t, err)

	// Removal: gone from the list, then from the specs.
	require.NoError(t, n.tree.Remove(igpu2.ID()))
	require.Eventually(t, func() bool { return len(i915.Devices()) == 1 }, wait, tick)
	require.Eventually(t, func() bool {
		_, err := os.Stat(n.specFile(t, igpu2.ID()))
		return os.IsNotExist(err)
	}, wait, tick)

	// Unbind, then unplug: the second step changes nothing under /dev, so
	// only the re-checks of unhealthy cards notice that it is gone.
	igpu3 := drmtest.IntelIGPU.WithPCI("0000:00:04.0").WithNodes(3, 131)
	require.NoError(t, n.tree.Add(igpu3))
	require.Eventually(t, func() bool { return i915.Health()[igpu3.ID()] == pluginapi.Healthy }, wait, tick)
	require.NoError(t, n.tree.Unbind(igpu3.ID()))
	require.Eventually(t, func() bool { return i915.Health()[igpu3.ID()] == pluginapi.Unhealthy }, wait, tick)
	require.NoError(t, n.tree.Remove(igpu3.ID()))
	require.Eventually(t, func() bool { _, listed := i915.Health()[igpu3.ID()]; return !listed }, wait, tick)

	// The last card of a resource: it stays registered with an empty list.
	require.NoError(t, n.tree.Remove(xe.ID()))
	require.Eventually(t, func() bool { return len(xeEP.Devices()) == 0 }, wait, tick)
	require.False(t, xeEP.Ended())
}

func TestAgentKubeletRestart(t *testing.T) {
	igpu := drmtest.IntelIGPU.WithNodes(0, 128)
	n := startNode(t, "cdi-cri", "", igpu)
	n.endpoint(t, "dri-cdi.dev/i915")
	require.NoError(t, n.kubelet.Restart(true))
	ep := n.endpoint(t, "dri-cdi.dev/i915")
	require.Equal(t, map[string]string{igpu.ID(): pluginapi.Healthy}, ep.Health())
	_, err := allocate(t, ep, igpu.ID())
	require.NoError(t, err)
}

func TestAgentConfiguredPool(t *testing.T) {
	igpu := drmtest.IntelIGPU.WithNodes(0, 128)
	n := startNode(t, "cdi-cri", "pools:\n- resource: gpu.intel.com/i915\n  drivers: [i915]\n  replicas: 2\n", igpu)
	ep := n.endpoint(t, "gpu.intel.com/i915")
	require.Len(t, ep.Devices(), 2)
	_, err := allocate(t, ep, igpu.ID()+"::0", igpu.ID()+"::1")
	require.ErrorContains(t, err, "two replicas of one card")
	resp, err := allocate(t, ep, igpu.ID()+"::1")
	require.NoError(t, err)
	require.Equal(t, []*pluginapi.CDIDevice{{Name: "dri-cdi.dev/gpu=" + igpu.ID()}}, resp.CdiDevices)
}

func TestAgentShutdown(t *testing.T) {
	igpu := drmtest.IntelIGPU.WithNodes(0, 128)
	n := startNode(t, "cdi-cri", "", igpu)
	ep := n.endpoint(t, "dri-cdi.dev/i915")
	n.Cancel()
	select {
	case err := <-n.Done:
		require.NoError(t, err)
		n.Done <- err
	case <-time.After(wait):
		t.Fatal("agent did not stop")
	}
	require.Eventually(t, ep.Ended, wait, tick)
	require.Len(t, ep.Devices(), 1, "no empty list on shutdown")
	entries, err := os.ReadDir(n.kubelet.Dir())
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), "dri-cdi-"), "socket %s left behind", e.Name())
	}
	require.FileExists(t, n.specFile(t, igpu.ID()), "specs stay for containers that use them")
}

// TestAgentReadyButSaysWhyWithoutDRMOrKubeletDir runs the agent on a node
// without <sysfs>/class/drm and without the kubelet's directory: it keeps
// running and is ready (a node without a GPU is normal), and both its log
// and /readyz name each missing directory.
func TestAgentReadyButSaysWhyWithoutDRMOrKubeletDir(t *testing.T) {
	root := t.TempDir()
	roots := drm.Roots{Sysfs: filepath.Join(root, "sys"), Dev: filepath.Join(root, "dev")}
	require.NoError(t, os.MkdirAll(roots.Sysfs, 0o755))
	kubelet := filepath.Join(root, "no-kubelet", "device-plugins")

	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	base := runAgent(t, deviceplugin.RunOptions{Agent: agent.Options{Roots: roots, Log: logrus.NewEntry(log)}, Backend: deviceplugin.BackendOptions{KubeletDir: kubelet}}).Metrics
	var code int
	var body string
	require.Eventually(t, func() bool {
		code, body = metricstest.Get(t, base+"/readyz")
		return strings.HasPrefix(body, "ok\n")
	}, wait, tick)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "\nwarning: "+filepath.Join(roots.Sysfs, "class", "drm")+": does not exist")
	require.Contains(t, body, "\nwarning: "+kubelet+": does not exist")

	var warned []string
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			warned = append(warned, e.Message)
		}
	}
	require.Contains(t, strings.Join(warned, "\n"), "class/drm: does not exist: no DRM driver")
	require.Contains(t, strings.Join(warned, "\n"), kubelet+": does not exist")
}

// TestAgentReadyzHasNoWarningOnAHealthyNode is the counterpart: with both
// directories there, /readyz says only ok.
func TestAgentReadyzHasNoWarningOnAHealthyNode(t *testing.T) {
	tree, err := drmtest.NewTree(t.TempDir())
	require.NoError(t, err)
	base := runAgent(t, deviceplugin.RunOptions{Agent: agent.Options{Roots: tree.Roots(), Log: testEntry(t)}, Backend: deviceplugin.BackendOptions{KubeletDir: kubelettest.ShortDir(t)}}).Metrics
	var code int
	var body string
	require.Eventually(t, func() bool {
		code, body = metricstest.Get(t, base+"/readyz")
		return code == http.StatusOK
	}, wait, tick)
	require.Equal(t, "ok\n", body)
}
