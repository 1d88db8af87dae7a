package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// hybridNode is a host where simpledrm took card0 before i915 bound, with
// an AMD dGPU (and /dev/kfd) and a display-only BMC.
func hybridNode(t *testing.T) *drmtest.Tree {
	t.Helper()
	drmtest.SkipUnlessRoot(t)
	return drmtest.MustBuild(t,
		drmtest.Simpledrm.WithNodes(0, -1),
		drmtest.IntelIGPU.WithNodes(1, 128),
		drmtest.AMDdGPU.WithNodes(2, 129),
		drmtest.ASpeedBMC.WithNodes(3, -1),
	)
}

func rootFlagsOf(tree *drmtest.Tree) []string {
	r := tree.Roots()
	return []string{"--sysfs-root", r.Sysfs, "--dev-root", r.Dev}
}

func TestDiscover(t *testing.T) {
	tree := hybridNode(t)
	for _, format := range []string{"table", "json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			r := run(t, nil, append([]string{"discover", "-o", format}, rootFlagsOf(tree)...)...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			require.Empty(t, r.stderr)
			golden(t, "discover-hybrid."+format, r.stdout, tree.Root(), "<root>")
		})
	}

	r := run(t, nil, append([]string{"discover", "-o", "json"}, rootFlagsOf(tree)...)...)
	var got []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	type brief struct{ id, driver, card, render string }
	var briefs []brief
	for _, c := range got {
		briefs = append(briefs, brief{c["id"].(string), c["driver"].(string), c["card"].(string), c["render"].(string)})
	}
	require.Equal(t, []brief{
		{"0000:00:02.0", "i915", "/dev/dri/card1", "/dev/dri/renderD128"},
		{"0000:02:00.0", "ast", "/dev/dri/card3", ""},
		{"0000:03:00.0", "amdgpu", "/dev/dri/card2", "/dev/dri/renderD129"},
		{"simple-framebuffer.0", "simple-framebuffer", "/dev/dri/card0", ""},
	}, briefs)

	// YAML carries the same objects as JSON.
	ry := run(t, nil, append([]string{"discover", "-o", "yaml"}, rootFlagsOf(tree)...)...)
	var fromYAML []map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(ry.stdout), &fromYAML))
	require.Equal(t, got, fromYAML)
}

// An NPU node: the Meteor Lake iGPU, its NPU, and a Gaudi2 whose
// control node is refused on stderr.
func TestDiscoverAccel(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	tree := drmtest.MustBuild(t, drmtest.IntelIGPU, drmtest.IntelNPU, drmtest.HabanaGaudi2.WithNodes(1, -1))
	r := run(t, nil, append([]string{"discover"}, rootFlagsOf(tree)...)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, filepath.Join(tree.Roots().Sysfs, "class", "accel", "accel_controlD1")+": accel control node, not served")
	golden(t, "discover-npu.table", r.stdout, tree.Root(), "<root>")

	r = run(t, nil, append([]string{"discover", "-o", "json"}, rootFlagsOf(tree)...)...)
	var got []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Len(t, got, 3)
	npu := got[1]
	require.Equal(t, "0000:00:0b.0", npu["id"])
	require.Equal(t, "accel", npu["class"])
	require.Equal(t, "/dev/accel/accel0", npu["accel"])
	require.Equal(t, "", npu["card"])
	require.Equal(t, "drm", got[0]["class"])
}

func TestDiscoverEnvRoots(t *testing.T) {
	tree := hybridNode(t)
	r := run(t, map[string]string{
		"DRI_CDI_SYSFS_ROOT": tree.Roots().Sysfs, "DRI_CDI_DEV_ROOT": tree.Roots().Dev, "DRI_CDI_OUTPUT": "json",
	}, "discover")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var got []cardView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Len(t, got, 4)
}

func TestDiscoverSkippedEntryWarns(t *testing.T) {
	tree := hybridNode(t)
	// The AMD card's render node vanished from the dev tree.
	missing := filepath.Join(tree.Roots().Dev, "dri", "renderD129")
	require.NoError(t, os.Remove(missing))
	r := run(t, nil, append([]string{"discover", "-o", "json"}, rootFlagsOf(tree)...)...)
	require.Equal(t, ExitOK, r.code)
	require.Contains(t, r.stderr, "warning: skip DRM entry ")
	require.Contains(t, r.stderr, missing)
	var got []cardView
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	for _, c := range got {
		require.NotEqual(t, "0000:03:00.0", c.ID, "half a card was reported")
	}
	require.Len(t, got, 3)
}

func TestDiscoverNoDRM(t *testing.T) {
	// A sysfs without class/drm: no root needed.
	sys, dev := t.TempDir(), t.TempDir()
	roots := []string{"--sysfs-root", sys, "--dev-root", dev}
	cases := map[string]struct {
		sysfs  string // default: sys
		format string
		stdout string
		stderr string
	}{
		"json":  {format: "json", stdout: "[]\n"},
		"yaml":  {format: "yaml", stdout: "[]\n"},
		"table": {format: "table", stdout: "", stderr: "no DRM card or accel device found under " + filepath.Join(sys, "class", "drm") + " or " + filepath.Join(sys, "class", "accel") + "\n"},
		"sysfs root missing": {
			sysfs: filepath.Join(sys, "nonexistent"), format: "json", stdout: "[]\n",
			stderr: "warning: sysfs root " + filepath.Join(sys, "nonexistent") + " does not exist\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			args := roots
			if tc.sysfs != "" {
				args = []string{"--sysfs-root", tc.sysfs, "--dev-root", dev}
			}
			r := run(t, nil, append([]string{"discover", "-o", tc.format}, args...)...)
			require.Equal(t, ExitOK, r.code)
			require.Equal(t, tc.stdout, r.stdout)
			require.Equal(t, tc.stderr, r.stderr)
		})
	}
}

func TestDiscoverUnreadableClass(t *testing.T) {
	sys := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "class"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sys, "class", "drm"), []byte("not a dir"), 0o644))
	r := run(t, nil, "discover", "--sysfs-root", sys, "--dev-root", t.TempDir())
	require.Equal(t, ExitError, r.code)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "dri-cdi: ")
	require.Contains(t, r.stderr, filepath.Join(sys, "class", "drm"))
}
