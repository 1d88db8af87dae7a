package harness

import (
	"context"
	"strings"
	"testing"
)

// TestDRAOverlayRenders renders the e2e DRA overlay with kustomize (when
// the e2e tools are installed) and checks that the DRA DaemonSet's host
// paths moved to the node's private ones, the kubelet's plugin dirs at
// the same path inside.
func TestDRAOverlayRenders(t *testing.T) {
	c := overlayTestCluster(t)
	s := renderDRAOverlay(t, c)
	i := strings.Index(s, "name: dri-cdi-dra\n  namespace: dri-cdi\nspec:")
	if i < 0 {
		t.Fatalf("no DRA DaemonSet in\n%s", s)
	}
	dp, dra := s[:i], s[i:]
	// The device plugin's DaemonSet, before it, is retargeted too.
	for _, want := range []string{"--sysfs-root=/e2e/drm/sys", "path: /e2e/cdi", "path: /e2e/kubelet/pod-resources"} {
		if !strings.Contains(dp, want) {
			t.Errorf("rendered device-plugin DaemonSet lacks %q", want)
		}
	}
	for _, want := range []string{"--sysfs-root=/e2e/drm/sys", "--dev-root=/e2e/drm/dev",
		"--registrar-dir=/e2e/kubelet/plugins_registry", "--plugin-data-dir=/e2e/kubelet/plugins/dri-cdi.dev",
		"mountPath: /e2e/kubelet/plugins_registry", "path: /e2e/kubelet/plugins_registry",
		"mountPath: /e2e/kubelet/plugins/dri-cdi.dev", "path: /e2e/kubelet/plugins/dri-cdi.dev",
		"path: /e2e/drm/dev/dri", "mountPath: /e2e/drm/dev/dri", "path: /e2e/cdi", "hostNetwork: true",
		"name: KUBERNETES_SERVICE_HOST\n          value: 127.0.0.1", "path: /e2e/nri-run", "path: /e2e/kubelet/pod-resources"} {
		if !strings.Contains(dra, want) {
			t.Errorf("rendered DRA DaemonSet lacks %q", want)
		}
	}
	for _, gone := range []string{"/var/lib/kubelet/plugins", "path: /var/run/cdi", "path: /var/run/nri"} {
		if strings.Contains(dra, gone) {
			t.Errorf("rendered DRA DaemonSet still has %q", gone)
		}
	}
}

// TestMultiNodeDRAOverlayRenders renders the e2e DRA overlay of a
// multi-node cluster: one overlay for every node, so the host paths are
// the view dir's (the same path on each node, its own directory inside
// its mount namespace) and the kubelet's defaults, and the DRA pod dials
// the API server on the host bridge.
func TestMultiNodeDRAOverlayRenders(t *testing.T) {
	c := overlayTestCluster(t)
	c.Node, c.nodeView, c.apiHost = nil, "/e2e/view", hostBridgeIP
	s := renderDRAOverlay(t, c)
	for _, want := range []string{"--sysfs-root=/e2e/view/drm/sys", "--dev-root=/e2e/view/drm/dev", "path: /e2e/view/cdi",
		"path: /e2e/view/nri-run", "path: /var/lib/kubelet/pod-resources", "--registrar-dir=/var/lib/kubelet/plugins_registry",
		"--plugin-data-dir=/var/lib/kubelet/plugins/dri-cdi.dev", "name: KUBERNETES_SERVICE_HOST\n          value: 198.18.255.1"} {
		if !strings.Contains(s, want) {
			t.Errorf("rendered overlay lacks %q", want)
		}
	}
	if strings.Contains(s, "/e2e/drm") || strings.Contains(s, "127.0.0.1") {
		t.Errorf("rendered overlay names a single node's paths or loopback:\n%s", s)
	}
}

// renderDRAOverlay writes c's e2e DRA overlay and renders it.
func renderDRAOverlay(t *testing.T, c *Cluster) string {
	t.Helper()
	d, err := c.WriteDRAOverlay(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Kustomize(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
