package harness

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

//go:embed manifests/kustomization.yaml.tmpl
var overlayTemplate string

// OverlayOptions change the e2e overlay beyond its host paths, the way a
// user's own overlay would for an upgrade.
type OverlayOptions struct {
	// Config replaces the base's config.yaml ("" keeps it).
	Config string
	// ImageTag replaces the base's image tag ("" keeps it).
	ImageTag string
	// DevPaths are paths under the node's dev root (video10, dma_heap)
	// mounted read-only into both containers at the same path: the
	// companion nodes of a pool, which the agent must see.
	DevPaths []string
	// DmemCapacity, when set, is the content of a dmem.capacity the DRA
	// plugin reads instead of the host's (DRA overlay only): it gives the
	// node's fake cards dmem regions, so that shared cards publish memory.
	DmemCapacity string
}

// WriteOverlay writes the e2e overlay of the repository's kustomize base
// into dir (created) and returns dir, for `kubectl apply -k`.
func (c *Cluster) WriteOverlay(dir string, opts OverlayOptions) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	base, err := filepath.Rel(dir, filepath.Join(root, "deployments", "kustomize", "base"))
	if err != nil {
		return "", err
	}
	return dir, c.writeKustomization(dir, base, "dri-cdi", true, opts)
}

// overlayPaths are the host paths the e2e overlays give the DaemonSets,
// as the nodes' runtimes resolve them.
type overlayPaths struct {
	Sysfs, Dev, CDIDir, NRIDir      string
	PodResourcesDir                 string
	RegistryDir, PluginDir, APIHost string
}

// overlayPaths are the single node's private paths; in a multi-node
// cluster the paths every node sees its own at: its directory under the
// view dir, its kubelet dir at /var/lib/kubelet (netns.go).
func (c *Cluster) overlayPaths() overlayPaths {
	if c.nodeView != "" {
		return overlayPaths{
			Sysfs:           filepath.Join(c.nodeView, "drm", "sys"),
			Dev:             filepath.Join(c.nodeView, "drm", "dev"),
			CDIDir:          filepath.Join(c.nodeView, "cdi"),
			NRIDir:          filepath.Join(c.nodeView, "nri-run"),
			PodResourcesDir: filepath.Join(hostKubeletDir, "pod-resources"),
			RegistryDir:     filepath.Join(hostKubeletDir, "plugins_registry"),
			PluginDir:       filepath.Join(hostKubeletDir, "plugins", "dri-cdi.dev"),
			APIHost:         c.apiHost,
		}
	}
	n := c.Node
	return overlayPaths{
		Sysfs:           n.SysfsRoot,
		Dev:             n.DevRoot,
		CDIDir:          n.CDIDir,
		NRIDir:          filepath.Dir(n.NRISocket),
		PodResourcesDir: c.podResourcesDir(),
		RegistryDir:     n.PluginsRegistryDir(),
		PluginDir:       n.DRAPluginDir(),
		APIHost:         c.apiHost,
	}
}

// writeKustomization renders the overlay template into dir: resource is
// the base (or a rendered file), paths adds the CDI, NRI and
// pod-resources retargeting to the fake-DRM-tree patches.
func (c *Cluster) writeKustomization(dir, resource, daemonSet string, paths bool, opts OverlayOptions) error {
	p := c.overlayPaths()
	data := map[string]any{
		"Base":            resource,
		"DaemonSet":       daemonSet,
		"Paths":           paths,
		"Sysfs":           p.Sysfs,
		"Dev":             p.Dev,
		"CDIDir":          p.CDIDir,
		"NRIDir":          p.NRIDir,
		"PodResourcesDir": p.PodResourcesDir,
		"Config":          opts.Config,
		"ImageTag":        opts.ImageTag,
		"DevPaths":        opts.DevPaths,
	}
	var buf bytes.Buffer
	if err := template.Must(template.New("overlay").Option("missingkey=error").Parse(overlayTemplate)).Execute(&buf, data); err != nil {
		return fmt.Errorf("e2e overlay: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	if opts.Config != "" {
		return os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(opts.Config), 0o644)
	}
	return nil
}

// HelmInstall installs the repository's chart as release, in namespace
// dri-cdi, the way a user does, with values for the node's private CDI
// dir, NRI socket and PodResources socket, and the overlay's fake-DRM-tree
// patches as a post-renderer (the chart has no values for the sysfs and
// dev roots: a real node's are /sys and /dev).
func (c *Cluster) HelmInstall(ctx context.Context, release string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(c.Dir, "helm-"+release)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	n := c.Node
	values := fmt.Sprintf("paths:\n  cdiDir: %q\n  nriSocket: %q\n  podResourcesSocket: %q\n", n.CDIDir, n.NRISocket, n.PodResourcesSocket)
	if err := os.WriteFile(filepath.Join(dir, "values.yaml"), []byte(values), 0o644); err != nil {
		return "", err
	}
	fullname := release
	if !strings.Contains(release, "dri-cdi") {
		fullname = release + "-dri-cdi"
	}
	if err := c.writeKustomization(dir, "all.yaml", fullname, false, OverlayOptions{}); err != nil {
		return "", err
	}
	post := filepath.Join(dir, "post-render")
	script := fmt.Sprintf("#!/bin/sh\nset -e\ncat > %q\nexec %q build %q\n", filepath.Join(dir, "all.yaml"), c.Tools.Kustomize, dir)
	if err := os.WriteFile(post, []byte(script), 0o755); err != nil {
		return "", err
	}
	return c.Helm(ctx, "install", release, filepath.Join(root, "deployments", "helm", "dri-cdi"),
		"--namespace", "dri-cdi", "--create-namespace",
		"--values", filepath.Join(dir, "values.yaml"),
		"--post-renderer", post,
		"--wait", "--timeout", "3m")
}
