package test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/config"
)

// sharingBlocks returns docs/sharing.md's YAML blocks by the file name
// their first line names ("# kustomization.yaml").
func sharingBlocks(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs/sharing.md"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, m := range regexp.MustCompile("(?s)```yaml\n# ([a-z.]+)\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
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
