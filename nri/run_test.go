package nri_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
)

// TestRun runs dri-cdi-nri as main does, against the real NRI runtime
// side, a fake kubelet and spec files from the agent's writer.
func TestRun(t *testing.T) {
	dir, err := os.MkdirTemp("", "dc")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	const card, res = "0000:00:02.0", "dri-cdi.dev/i915"

	w, err := cdi.NewWriter(filepath.Join(dir, "cdi"), cdi.DefaultKind)
	require.NoError(t, err)
	_, err = w.Sync([]drm.Card{{
		ID: card, Name: "card1", Driver: "i915", Bus: "pci", PCIAddress: card, NUMANode: -1,
		CardNode:   drm.DeviceNode{Path: "/dev/dri/card1", HostPath: "/dev/dri/card1", Major: 226, Minor: 1},
		RenderNode: &drm.DeviceNode{Path: "/dev/dri/renderD128", HostPath: "/dev/dri/renderD128", Major: 226, Minor: 128},
	}})
	require.NoError(t, err)

	// The host as the spec describes it; no real device nodes needed.
	hostNodes := map[string]nri.HostDevice{
		"/dev/dri/card1":      {Char: true, Major: 226, Minor: 1},
		"/dev/dri/renderD128": {Char: true, Major: 226, Minor: 128},
	}

	kubelet, err := podresourcestest.Start(filepath.Join(dir, "kubelet.sock"))
	require.NoError(t, err)
	t.Cleanup(kubelet.Stop)
	kubelet.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {res: {card}}})

	rt, err := adaptation.New("containerd", "v2.4.2",
		func(ctx context.Context, cb adaptation.SyncCB) error { _, err := cb(ctx, nil, nil); return err },
		func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil },
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
		adaptation.WithSocketPath(filepath.Join(dir, "nri.sock")))
	require.NoError(t, err)
	require.NoError(t, rt.Start())
	t.Cleanup(rt.Stop)

	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- nri.Run(ctx, nri.WithHostStat(nri.Options{
			NRISocket: filepath.Join(dir, "nri.sock"), PluginName: "dri-cdi", PluginIndex: "10",
			PodResourcesSocket: kubelet.Socket(), PodResourcesTimeout: time.Second,
			CDIDir: filepath.Join(dir, "cdi"), MetricsAddr: "127.0.0.1:0",
			Log: logrus.NewEntry(log),
		}, func(p string) (nri.HostDevice, error) { return hostNodes[p], nil }))
	}()

	k, v := alloc.Annotation(res, []string{card})
	req := func() *api.CreateContainerRequest {
		return &api.CreateContainerRequest{
			Pod:       &api.PodSandbox{Id: "s1", Name: "gpu", Namespace: "default"},
			Container: &api.Container{Id: "c1", Name: "app", Annotations: map[string]string{k: v}},
		}
	}
	require.Eventually(t, func() bool {
		rsp, err := rt.CreateContainer(context.Background(), req())
		return err == nil && len(rsp.GetAdjust().GetLinux().GetDevices()) == 2
	}, 10*time.Second, 10*time.Millisecond)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	log := logrus.NewEntry(logrus.New())
	err := nri.Run(context.Background(), nri.Options{Config: "/nonexistent/config.yaml", Log: log})
	require.ErrorContains(t, err, "/nonexistent/config.yaml")
	err = nri.Run(context.Background(), nri.Options{PodResourcesSocket: "/x.sock", PodResourcesTimeout: 0, Log: log})
	require.ErrorContains(t, err, "pod-resources-timeout")
	err = nri.Run(context.Background(), nri.Options{PodResourcesSocket: "/x.sock", PodResourcesTimeout: time.Second})
	require.ErrorContains(t, err, "no logger")
}
