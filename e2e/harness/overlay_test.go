package harness

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestOverlayRenders renders the e2e overlay with kustomize (when the
// e2e tools are installed) and checks that only the host paths moved.
func TestOverlayRenders(t *testing.T) {
	c := overlayTestCluster(t)
	dir := t.TempDir()
	for name, opts := range map[string]OverlayOptions{
		"plain":      {},
		"upgrade":    {ImageTag: "v9", Config: "defaultPools: true\n"},
		"companions": {DevPaths: []string{"video10", "dma_heap"}},
	} {
		d, err := c.WriteOverlay(filepath.Join(dir, name), opts)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.Kustomize(context.Background(), d)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, want := range []string{"--sysfs-root=/e2e/drm/sys", "--dev-root=/e2e/drm/dev", "path: /e2e/drm/dev/dri", "mountPath: /e2e/drm/dev/dri",
			"path: /e2e/cdi", "path: /e2e/nri-run", "path: /e2e/kubelet/pod-resources", "path: /var/lib/kubelet/device-plugins"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s: rendered overlay lacks %q", name, want)
			}
		}
		if opts.ImageTag != "" && !strings.Contains(s, "image: ghcr.io/dri-cdi/dri-cdi:v9") {
			t.Errorf("%s: image tag not replaced", name)
		}
		for _, p := range opts.DevPaths {
			if strings.Count(s, "mountPath: /e2e/drm/dev/"+p) != 2 || !strings.Contains(s, "path: /e2e/drm/dev/"+p) {
				t.Errorf("%s: %s not mounted into both containers", name, p)
			}
		}
		for _, p := range []string{"/e2e/drm/dev/accel"} {
			if strings.Count(s, "mountPath: "+p) != 2 {
				t.Errorf("%s: %s not mounted into both containers", name, p)
			}
		}
		if opts.Config != "" && strings.Contains(s, "cdiKind") {
			t.Errorf("%s: config not replaced", name)
		}
	}
}

// overlayTestCluster is a cluster with only what the overlay writers and
// Kustomize read: a node's private paths and the cached kustomize. It
// skips the test when kustomize is not installed (make e2e-tools).
func overlayTestCluster(t *testing.T) *Cluster {
	t.Helper()
	kustomize := filepath.Join(envOr(EnvCache, DefaultCache), "bin", "kustomize")
	if executable(kustomize) != nil {
		t.Skip("kustomize not installed (make e2e-tools)")
	}
	c := &Cluster{Dir: t.TempDir(), Node: &Node{SysfsRoot: "/e2e/drm/sys", DevRoot: "/e2e/drm/dev", CDIDir: "/e2e/cdi", KubeletRoot: "/e2e/kubelet",
		NRISocket: "/e2e/nri-run/nri.sock", PodResourcesSocket: "/e2e/kubelet/pod-resources/kubelet.sock"}, apiHost: "127.0.0.1"}
	c.Tools.Kustomize = kustomize
	return c
}
