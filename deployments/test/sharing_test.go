package test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/dri-cdi/dri-cdi/pkg/config"
)

// sharesCapacity and idAttribute are pkg/dra's CapacityShares and the
// fully qualified AttrID: what the devices publish (this module does not
// link pkg/dra; the e2e applies these templates to the real scheduler).
const (
	sharesCapacity = "shares"
	idAttribute    = config.DRADriver + "/id"
)

// sharingBlocks returns docs/sharing.md's YAML blocks by the file name
// their first line names ("# kustomization.yaml").
func sharingBlocks(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs/sharing.md"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)```yaml\n# ([a-z.-]+)\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		require.NotContains(t, out, m[1], "docs/sharing.md shows %s twice", m[1])
		out[m[1]] = m[2]
	}
	return out
}

// sharedPool checks that a rendered config holds the shared Intel pool.
func sharedPool(t *testing.T, what, raw string) config.PoolConfig {
	t.Helper()
	cfg, err := config.Parse([]byte(raw))
	require.NoError(t, err, what)
	require.Len(t, cfg.Pools, 1, what)
	p := cfg.Pools[0]
	require.Equal(t, []string{"i915", "xe"}, p.Drivers, "%s: one pool takes both Intel drivers", what)
	require.Equal(t, 2, p.Replicas, what)
	return p
}

// TestSharingRecipe renders docs/sharing.md's kustomization (the
// repository's k3s overlay in place of the remote one) and its Helm
// values, and checks that both give the agent the pool the page shows.
func TestSharingRecipe(t *testing.T) {
	blocks := sharingBlocks(t)
	for _, f := range []string{"config.yaml", "kustomization.yaml", "values.yaml"} {
		require.Contains(t, blocks, f)
	}
	shown := sharedPool(t, "config.yaml", blocks["config.yaml"])

	remote := regexp.MustCompile(`https://github\.com/dri-cdi/dri-cdi/(deployments/kustomize/overlays/k3s)\?ref=v[0-9.]+`)
	m := remote.FindStringSubmatch(blocks["kustomization.yaml"])
	require.NotNil(t, m, "the kustomization takes a release's k3s overlay")
	local, err := filepath.Abs(filepath.Join(repoRoot, m[1]))
	require.NoError(t, err)
	dir := t.TempDir()
	// kustomize takes a base by relative path only.
	rel, err := filepath.Rel(dir, local)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(strings.Replace(blocks["kustomization.yaml"], m[0], rel, 1)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(blocks["config.yaml"]), 0o644))
	k := mustRender(t, "sharing kustomization", func() ([]byte, error) { return RenderKustomize(dir) })
	require.Equal(t, shown, sharedPool(t, "kustomize", k.configMap(t).Data["config.yaml"]))
	require.Len(t, k.objs, len(mustRender(t, "kustomize-k3s", variants["kustomize-k3s"].render).objs), "the base's ConfigMap is replaced, not added to")

	values := filepath.Join(dir, "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(blocks["values.yaml"]), 0o644))
	h := mustRender(t, "sharing values", func() ([]byte, error) { return RenderChart(chartDir, values) })
	require.Equal(t, shown, sharedPool(t, "helm", h.configMap(t).Data["config.yaml"]))
}

// draSharesExample is the DRA shares recipe of docs/sharing.md.
const draSharesExample = "../kustomize/examples/dra-shares"

// TestDRASharesExample renders the DRA shares recipe and decodes its
// ResourceClaimTemplates strictly: the overlay's ConfigMap is replaced
// by a config whose pool has shares, and the templates ask for one
// share, all of the pool's shares, and one share on each of two cards.
func TestDRASharesExample(t *testing.T) {
	r := mustRender(t, "dra-shares", func() ([]byte, error) { return RenderKustomize(draSharesExample) })
	cfg, err := config.Parse([]byte(r.configMap(t).Data["config.yaml"]))
	require.NoError(t, err)
	require.Len(t, cfg.Pools, 1)
	require.NotNil(t, cfg.Pools[0].Shares)
	shares := *cfg.Pools[0].Shares
	require.Equal(t, 2, shares)
	overlay := mustRender(t, "kustomize-dra", kustomize("overlays/dra"))
	require.Len(t, r.objs, len(overlay.objs), "the overlay's ConfigMap is replaced, not added to")

	// The Helm form of docs/sharing.md gives the agent's config the same
	// pool, and runs the DRA plugin.
	values := filepath.Join(t.TempDir(), "dra-values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(sharingBlocks(t)["dra-values.yaml"]), 0o644))
	h := mustRender(t, "sharing dra-values", func() ([]byte, error) { return RenderChart(chartDir, values) })
	hcfg, err := config.Parse([]byte(h.configMap(t).Data["config.yaml"]))
	require.NoError(t, err)
	require.Equal(t, cfg.Pools, hcfg.Pools, "the Helm form gives the recipe's pool")
	dras := 0
	for _, o := range h.objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok && strings.HasSuffix(ds.Name, "-dra") {
			dras++
		}
	}
	require.Equal(t, 1, dras, "the Helm form runs the DRA plugin")

	raw, err := os.ReadFile(filepath.Join(draSharesExample, "claim-templates.yaml"))
	require.NoError(t, err)
	objs, err := Decode(raw)
	require.NoError(t, err)
	templates := map[string]*resourcev1.ResourceClaimTemplate{}
	for _, o := range objs {
		tmpl, ok := o.(*resourcev1.ResourceClaimTemplate)
		require.True(t, ok, "claim-templates.yaml holds only ResourceClaimTemplates, not %T", o)
		require.Empty(t, tmpl.Namespace, "the templates are applied in the apps' namespace")
		templates[tmpl.Name] = tmpl
	}
	require.Len(t, templates, 4)
	classes := map[string]bool{}
	for _, o := range overlay.objs {
		if c, ok := o.(*resourcev1.DeviceClass); ok {
			classes[c.Name] = true
		}
	}
	for name, tmpl := range templates {
		for _, req := range tmpl.Spec.Spec.Devices.Requests {
			require.NotNil(t, req.Exactly, name)
			require.True(t, classes[req.Exactly.DeviceClassName], "%s: class %s is one the DRA overlay ships", name, req.Exactly.DeviceClassName)
		}
	}
	one := templates["gpu-share"].Spec.Spec.Devices.Requests
	require.Len(t, one, 1)
	require.Nil(t, one[0].Exactly.Capacity, "one share: the request policy's default")

	whole := templates["gpu-whole"].Spec.Spec.Devices.Requests
	require.Len(t, whole, 1)
	require.NotNil(t, whole[0].Exactly.Capacity)
	q, ok := whole[0].Exactly.Capacity.Requests[sharesCapacity]
	require.True(t, ok, "the whole card asks for the capacity the devices publish, by its name %q", sharesCapacity)
	require.Equal(t, int64(shares), q.Value(), "the whole card is all of the pool's shares")

	mem := templates["gpu-share-2gi"].Spec.Spec.Devices.Requests
	require.Len(t, mem, 1)
	require.NotNil(t, mem[0].Exactly.Capacity)
	q, ok = mem[0].Exactly.Capacity.Requests["memory"]
	require.True(t, ok, "the memory share asks for the capacity the devices publish, by its name memory")
	require.Equal(t, int64(2<<30), q.Value())

	two := templates["gpu-share-on-two-cards"].Spec.Spec.Devices
	require.Len(t, two.Requests, 2)
	require.Len(t, two.Constraints, 1)
	require.NotNil(t, two.Constraints[0].DistinctAttribute)
	require.Equal(t, resourcev1.FullyQualifiedName(idAttribute), *two.Constraints[0].DistinctAttribute)
}

// TestChartAcceptsRequireMemoryLimit: the chart's values schema lets a
// pool set requireMemoryLimit, and the config it renders keeps it.
func TestChartAcceptsRequireMemoryLimit(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(`dra:
  enabled: true
config:
  pools:
  - resource: dri-cdi.dev/xe
    drivers: [xe]
    shares: 4
    requireMemoryLimit: true
`), 0o644))
	h := mustRender(t, "requireMemoryLimit values", func() ([]byte, error) { return RenderChart(chartDir, values) })
	cfg, err := config.Parse([]byte(h.configMap(t).Data["config.yaml"]))
	require.NoError(t, err)
	require.Len(t, cfg.Pools, 1)
	require.True(t, cfg.Pools[0].RequireMemoryLimit)
}

// plexJellyfinExample is docs/sharing.md's Plex and Jellyfin recipe.
const plexJellyfinExample = "../kustomize/examples/plex-jellyfin"

// mediaServers returns the recipe's Deployments by name, and checks what
// both forms share: namespace media, one replica each, Recreate, no
// privilege and no hostPath (the GPU comes from dri-cdi, not /dev/dri).
func mediaServers(t *testing.T, objs []runtime.Object) map[string]*appsv1.Deployment {
	t.Helper()
	out := map[string]*appsv1.Deployment{}
	for _, o := range objs {
		d, ok := o.(*appsv1.Deployment)
		if !ok {
			continue
		}
		require.Equal(t, "media", d.Namespace, d.Name)
		require.Equal(t, int32(1), *d.Spec.Replicas, d.Name)
		require.Equal(t, appsv1.RecreateDeploymentStrategyType, d.Spec.Strategy.Type, "%s: a rollout must not wait for the slot its old pod holds", d.Name)
		spec := d.Spec.Template.Spec
		for _, v := range spec.Volumes {
			require.Nil(t, v.HostPath, "%s: no hostPath", d.Name)
		}
		require.Len(t, spec.Containers, 1, d.Name)
		c := spec.Containers[0]
		require.True(t, c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged, d.Name)
		out[d.Name] = d
	}
	require.ElementsMatch(t, []string{"plex", "jellyfin"}, slices.Collect(maps.Keys(out)))
	return out
}

// TestPlexJellyfinRecipe renders both forms of the Plex and Jellyfin
// recipe. Device plugin: each server limits one of the resource the
// sharing page's pool advertises, and the pool's replicas cover both.
// DRA: no limit, one claim each from the recipe's gpu-share template (the
// dra-shares example's), whose pool's shares cover both.
func TestPlexJellyfinRecipe(t *testing.T) {
	dp := mustRender(t, "plex-jellyfin device-plugin", func() ([]byte, error) {
		return RenderKustomize(filepath.Join(plexJellyfinExample, "device-plugin"))
	})
	pool := sharedPool(t, "config.yaml", sharingBlocks(t)["config.yaml"])
	servers := mediaServers(t, dp.objs)
	require.GreaterOrEqual(t, pool.Replicas, len(servers), "the pool advertises each card once per server")
	for name, d := range servers {
		c := d.Spec.Template.Spec.Containers[0]
		q, ok := c.Resources.Limits[corev1.ResourceName(pool.Resource)]
		require.True(t, ok, "%s asks for the pool's resource %s", name, pool.Resource)
		require.Equal(t, int64(1), q.Value(), name)
	}

	dra := mustRender(t, "plex-jellyfin dra", func() ([]byte, error) {
		return RenderKustomize(filepath.Join(plexJellyfinExample, "dra"))
	})
	shares := mustRender(t, "dra-shares", func() ([]byte, error) { return RenderKustomize(draSharesExample) })
	cfg, err := config.Parse([]byte(shares.configMap(t).Data["config.yaml"]))
	require.NoError(t, err)
	servers = mediaServers(t, dra.objs)
	require.GreaterOrEqual(t, *cfg.Pools[0].Shares, len(servers), "the pool's shares cover both servers")
	var tmpl *resourcev1.ResourceClaimTemplate
	for _, o := range dra.objs {
		if o, ok := o.(*resourcev1.ResourceClaimTemplate); ok {
			require.Nil(t, tmpl, "one template")
			tmpl = o
		}
	}
	require.NotNil(t, tmpl)
	require.Equal(t, "media", tmpl.Namespace, "the template is in the apps' namespace")
	raw, err := os.ReadFile(filepath.Join(draSharesExample, "claim-templates.yaml"))
	require.NoError(t, err)
	recipe, err := Decode(raw)
	require.NoError(t, err)
	found := false
	for _, o := range recipe {
		if r, ok := o.(*resourcev1.ResourceClaimTemplate); ok && r.Name == tmpl.Name {
			require.Equal(t, r.Spec, tmpl.Spec, "the recipe's %s template", tmpl.Name)
			found = true
		}
	}
	require.True(t, found, "the dra-shares example has a template %s", tmpl.Name)
	for name, d := range servers {
		spec := d.Spec.Template.Spec
		c := spec.Containers[0]
		require.Empty(t, c.Resources.Limits, "%s: no device-plugin limit on a DRA node", name)
		require.Len(t, spec.ResourceClaims, 1, name)
		require.Equal(t, tmpl.Name, *spec.ResourceClaims[0].ResourceClaimTemplateName, name)
		require.Equal(t, []corev1.ResourceClaim{{Name: spec.ResourceClaims[0].Name}}, c.Resources.Claims, "%s's container uses the claim", name)
	}
}
