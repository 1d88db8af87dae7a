package cli

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/cdi/cditest"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

func TestCDIGenerateStdout(t *testing.T) {
	tree := hybridNode(t)
	r := run(t, nil, append([]string{"cdi", "generate"}, rootFlagsOf(tree)...)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Empty(t, r.stderr)
	golden(t, "cdi-generate-hybrid", r.stdout, tree.Root(), "<root>")

	// The printed documents are exactly the files Generate makes for the
	// advertised cards (display-only ones left out).
	advertised := renderCards(t, tree.Roots())
	files, err := cdi.Generate(cdi.DefaultKind, advertised)
	require.NoError(t, err)
	var want strings.Builder
	for _, f := range files {
		want.WriteString("---\n# file: " + f.Name + "\n" + string(f.Data))
	}
	require.Equal(t, want.String(), r.stdout)
}

// writtenSpecs returns the spec file names in dir and checks each loads
// with the CDI library.
func writtenSpecs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		_, err := cdilib.ReadSpec(filepath.Join(dir, e.Name()), 0)
		require.NoError(t, err)
	}
	sort.Strings(names)
	return names
}

func TestCDIGenerateOutputDir(t *testing.T) {
	tree := hybridNode(t)
	cases := map[string]struct {
		args   []string
		env    map[string]string
		config string
		files  []string
	}{
		"default excludes display-only": {
			files: []string{"dri-cdi.dev-gpu_0000-00-02.0.yaml", "dri-cdi.dev-gpu_0000-03-00.0.yaml", "dri-cdi.dev-gpu_all.yaml"},
		},
		"include display-only": {
			args: []string{"--include-display-only"},
			files: []string{
				"dri-cdi.dev-gpu_0000-00-02.0.yaml", "dri-cdi.dev-gpu_0000-02-00.0.yaml", "dri-cdi.dev-gpu_0000-03-00.0.yaml",
				"dri-cdi.dev-gpu_all.yaml", "dri-cdi.dev-gpu_simple-framebuffer.0.yaml",
			},
		},
		"include display-only from env": {
			env: map[string]string{"DRI_CDI_INCLUDE_DISPLAY_ONLY": "true"},
			files: []string{
				"dri-cdi.dev-gpu_0000-00-02.0.yaml", "dri-cdi.dev-gpu_0000-02-00.0.yaml", "dri-cdi.dev-gpu_0000-03-00.0.yaml",
				"dri-cdi.dev-gpu_all.yaml", "dri-cdi.dev-gpu_simple-framebuffer.0.yaml",
			},
		},
		"config pools pick the cards": {
			config: "defaultPools: false\npools:\n- resource: gpu.intel.com/i915\n  drivers: [i915]\n- resource: example.com/bmc\n  drivers: [ast]\n  includeDisplayOnly: true\n",
			files:  []string{"dri-cdi.dev-gpu_0000-00-02.0.yaml", "dri-cdi.dev-gpu_0000-02-00.0.yaml", "dri-cdi.dev-gpu_all.yaml"},
		},
		"config kind": {
			config: "cdiKind: example.com/gpu\n",
			files:  []string{"example.com-gpu_0000-00-02.0.yaml", "example.com-gpu_0000-03-00.0.yaml", "example.com-gpu_all.yaml"},
		},
		"kind flag beats config": {
			config: "cdiKind: example.com/gpu\n",
			args:   []string{"--kind", "other.io/display"},
			files:  []string{"other.io-display_0000-00-02.0.yaml", "other.io-display_0000-03-00.0.yaml", "other.io-display_all.yaml"},
		},
		"no pool takes anything": {
			config: "defaultPools: false\n",
			files:  nil,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run", "cdi")
			args := append([]string{"cdi", "generate", "--output-dir", out}, rootFlagsOf(tree)...)
			if tc.config != "" {
				cfg := filepath.Join(t.TempDir(), "config.yaml")
				require.NoError(t, os.WriteFile(cfg, []byte(tc.config), 0o644))
				args = append(args, "--config", cfg)
			}
			args = append(args, tc.args...)
			r := run(t, tc.env, args...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			var printed []string
			for _, f := range tc.files {
				printed = append(printed, filepath.Join(out, f))
			}
			require.Equal(t, strings.Join(printed, "\n"), strings.TrimSpace(r.stdout))
			if tc.files == nil {
				require.Contains(t, r.stderr, "no card to advertise")
				require.NotContains(t, r.stderr, "already up to date", "an empty set is not news of an update")
				_, err := os.Stat(out)
				if err == nil {
					require.Empty(t, writtenSpecs(t, out))
				}
				return
			}
			require.Equal(t, tc.files, writtenSpecs(t, out))

			// A second run changes nothing and says so.
			again := run(t, tc.env, args...)
			require.Equal(t, ExitOK, again.code, again.stderr)
			require.Contains(t, again.stderr, "already up to date")
		})
	}
}

func TestCDIGenerateMatchesWriter(t *testing.T) {
	tree := hybridNode(t)
	out := t.TempDir()
	r := run(t, map[string]string{"DRI_CDI_OUTPUT_DIR": out}, append([]string{"cdi", "generate"}, rootFlagsOf(tree)...)...)
	require.Equal(t, ExitOK, r.code, r.stderr)

	// What an agent's Writer would write for the same cards.
	advertised := renderCards(t, tree.Roots())
	ref := t.TempDir()
	w, err := cdi.NewWriter(ref, cdi.DefaultKind)
	require.NoError(t, err)
	_, err = w.Sync(advertised)
	require.NoError(t, err)
	require.Equal(t, cditest.DirFiles(t, ref), cditest.DirFiles(t, out))

	// A card that disappears loses its file on the next run.
	require.NoError(t, tree.Remove("0000:03:00.0"))
	r = run(t, map[string]string{"DRI_CDI_OUTPUT_DIR": out}, append([]string{"cdi", "generate"}, rootFlagsOf(tree)...)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Equal(t, []string{"dri-cdi.dev-gpu_0000-00-02.0.yaml", "dri-cdi.dev-gpu_all.yaml"}, writtenSpecs(t, out))
}

func TestCDIGenerateErrors(t *testing.T) {
	sys, dev := t.TempDir(), t.TempDir() // no class/drm: no cards, no root needed
	roots := []string{"--sysfs-root", sys, "--dev-root", dev}
	badConfig := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(badConfig, []byte("pools:\n- resource: x/y\n  drivers: [i915]\n  replicas: 0\n  colour: red\n"), 0o644))
	fileAsDir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(fileAsDir, nil, 0o644))
	cases := map[string]struct {
		args   []string
		code   int
		stderr []string
	}{
		"invalid kind":      {args: []string{"--kind", "nokind"}, code: ExitUsage, stderr: []string{`-kind: invalid CDI kind "nokind"`}},
		"missing config":    {args: []string{"--config", "/nonexistent/dri-cdi.yaml"}, code: ExitError, stderr: []string{"read config", "/nonexistent/dri-cdi.yaml"}},
		"invalid config":    {args: []string{"--config", badConfig}, code: ExitError, stderr: []string{badConfig, "colour"}},
		"output dir a file": {args: []string{"--output-dir", fileAsDir}, code: ExitError, stderr: []string{fileAsDir, "not a directory"}},
		"no cards stdout":   {args: nil, code: ExitOK, stderr: []string{"no card to advertise: no spec files"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := run(t, nil, append(append([]string{"cdi", "generate"}, roots...), tc.args...)...)
			require.Equal(t, tc.code, r.code, r.stderr)
			require.Empty(t, r.stdout)
			for _, s := range tc.stderr {
				require.Contains(t, r.stderr, s)
			}
		})
	}
}

// renderCards are the cards discovery finds under roots that the
// agent advertises by default: those with a render node, with their
// default companions.
func renderCards(t *testing.T, roots drm.Roots) []drm.Card {
	t.Helper()
	inv, err := config.Default().Discover(roots)
	require.NoError(t, err)
	var advertised []drm.Card
	for _, c := range inv.Cards {
		if !c.DisplayOnly() {
			advertised = append(advertised, c)
		}
	}
	return advertised
}
