package harness

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"text/template"
)

//go:embed manifests/dra-kustomization.yaml.tmpl
var draOverlayTemplate string

// DRAPluginDir is the DRA plugin's data dir on the node (its socket and
// checkpoint), under the kubelet's plugins dir.
func (n *Node) DRAPluginDir() string { return filepath.Join(n.PluginsDir(), "dri-cdi.dev") }

// WriteDRAOverlay writes the e2e overlay of the repository's DRA overlay
// (deployments/kustomize/overlays/dra) into dir (created) and returns dir,
// for `kubectl apply -k`: both DaemonSets retargeted to the node's private
// paths, so either runs, as the node's dri-cdi.dev/mode label says.
func (c *Cluster) WriteDRAOverlay(dir string) (string, error) {
	return c.WriteDRAOverlayWith(dir, OverlayOptions{})
}

// WriteDRAOverlayWith is WriteDRAOverlay with opts applied to the base
// overlay (a config of the user's own, shared by both DaemonSets).
func (c *Cluster) WriteDRAOverlayWith(dir string, opts OverlayOptions) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Two levels: the base e2e overlay's patches retarget the device
	// plugin's DaemonSet inside the DRA overlay (dir/device-plugin), so
	// that the node can also be switched back to the device plugin; the
	// DRA template on top retargets the DRA DaemonSet.
	dpDir := filepath.Join(dir, "device-plugin")
	if err := os.MkdirAll(dpDir, 0o755); err != nil {
		return "", err
	}
	base, err := filepath.Rel(dpDir, filepath.Join(root, "deployments", "kustomize", "overlays", "dra"))
	if err != nil {
		return "", err
	}
	if err := c.writeKustomization(dpDir, base, "dri-cdi", true, opts); err != nil {
		return "", err
	}
	dmemRoot := ""
	if opts.DmemCapacity != "" {
		dmemRoot = filepath.Join(dir, "dmem")
		if err := writeDmemRoot(dmemRoot, opts.DmemCapacity); err != nil {
			return "", err
		}
	}
	p := c.overlayPaths()
	data := map[string]any{
		"DmemRoot":        dmemRoot,
		"Base":            "device-plugin",
		"Sysfs":           p.Sysfs,
		"Dev":             p.Dev,
		"CDIDir":          p.CDIDir,
		"NRIDir":          p.NRIDir,
		"PodResourcesDir": p.PodResourcesDir,
		"RegistryDir":     p.RegistryDir,
		"PluginDir":       p.PluginDir,
		"APIHost":         p.APIHost,
		"APIPort":         fmt.Sprint(apiServerPort),
	}
	var buf bytes.Buffer
	if err := template.Must(template.New("dra-overlay").Option("missingkey=error").Parse(draOverlayTemplate)).Execute(&buf, data); err != nil {
		return "", fmt.Errorf("e2e DRA overlay: %w", err)
	}
	return dir, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), buf.Bytes(), 0o644)
}

// writeDmemRoot writes a cgroup root that offers the dmem controller and
// lists capacity as its regions: what the DRA plugin reads of a kernel
// with dmem.
func writeDmemRoot(dir, capacity string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("dmem\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "dmem.capacity"), []byte(capacity), 0o644)
}
