package cli

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest/hostlayout"
)

// hostCard is what an operator reads first in `discover -o json`.
type hostCard struct{ ID, Driver, Card, Render string }

// hostLayoutCLI lists, per layout of a real host, the cards `discover`
// reports and the CDI names `cdi generate` makes for them.
var hostLayoutCLI = map[string]struct {
	cards []hostCard
	names []string
}{
	"hybrid-laptop": {
		cards: []hostCard{
			{"0000:00:02.0", "i915", "/dev/dri/card1", "/dev/dri/renderD128"},
			{"0000:03:00.0", "amdgpu", "/dev/dri/card2", "/dev/dri/renderD129"},
		},
		names: []string{"dri-cdi.dev/gpu=0000:00:02.0", "dri-cdi.dev/gpu=0000:03:00.0", "dri-cdi.dev/gpu=all"},
	},
	"qemu-virtio-gpu": {
		cards: []hostCard{
			{"0000:00:01.0", "bochs-drm", "/dev/dri/card0", ""},
			{"0000:00:02.0", "virtio_gpu", "/dev/dri/card1", "/dev/dri/renderD128"},
		},
		names: []string{"dri-cdi.dev/gpu=0000:00:02.0", "dri-cdi.dev/gpu=all"},
	},
	"server-flex-bmc": {
		cards: []hostCard{
			{"0000:04:00.0", "ast", "/dev/dri/card0", ""},
			{"0000:4d:00.0", "xe", "/dev/dri/card2", "/dev/dri/renderD129"},
			{"0000:ca:00.0", "xe", "/dev/dri/card1", "/dev/dri/renderD128"},
		},
		names: []string{"dri-cdi.dev/gpu=0000:4d:00.0", "dri-cdi.dev/gpu=0000:ca:00.0", "dri-cdi.dev/gpu=all"},
	},
	"arm-rk3399": {
		cards: []hostCard{
			{"display-subsystem", "rockchip-drm", "/dev/dri/card0", ""},
			{"ff9a0000.gpu", "panfrost", "/dev/dri/card1", "/dev/dri/renderD128"},
		},
		names: []string{"dri-cdi.dev/gpu=all", "dri-cdi.dev/gpu=ff9a0000.gpu"},
	},
	"legacy-mgag200": {
		cards: []hostCard{{"0000:0a:00.0", "mgag200", "/dev/dri/card0", ""}},
		names: nil,
	},
}

func init() {
	laptop := hostLayoutCLI["hybrid-laptop"]
	// The malformed laptop shows the same cards: its broken devices are
	// skipped with a warning.
	hostLayoutCLI["hybrid-laptop-malformed"] = laptop
	// At boot simpledrm is there too; it is display-only, so it gets no
	// CDI name.
	boot := laptop
	boot.cards = append(slices.Clip(laptop.cards), hostCard{"simple-framebuffer.0", "simple-framebuffer", "/dev/dri/card0", ""})
	hostLayoutCLI["hybrid-laptop-boot"] = boot
}

// TestHostLayoutCLI runs discover, cdi generate, cdi validate and cdi
// list on the layouts of real hosts.
func TestHostLayoutCLI(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	var names []string
	for n := range hostLayoutCLI {
		names = append(names, n)
	}
	require.ElementsMatch(t, hostlayout.Names(), names, "every host layout needs expectations")
	for layout, want := range hostLayoutCLI {
		t.Run(layout, func(t *testing.T) {
			root := t.TempDir()
			roots, err := hostlayout.Build(root, layout)
			require.NoError(t, err)
			rootArgs := []string{"--sysfs-root", roots.Sysfs, "--dev-root", roots.Dev}

			r := run(t, nil, append([]string{"discover", "-o", "json"}, rootArgs...)...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			var views []map[string]any
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &views))
			got := []hostCard{}
			for _, v := range views {
				got = append(got, hostCard{v["id"].(string), v["driver"].(string), v["card"].(string), v["render"].(string)})
			}
			require.Equal(t, want.cards, got)
			warnings := 0
			for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
				if line == "" {
					continue
				}
				require.True(t, strings.HasPrefix(line, "warning: skip DRM entry "+filepath.Join(roots.Sysfs, "class", "drm")+"/"), line)
				warnings++
			}
			if layout == "hybrid-laptop-malformed" {
				require.Equal(t, 10, warnings, r.stderr)
			} else {
				require.Zero(t, warnings, r.stderr)
			}

			out := filepath.Join(t.TempDir(), "cdi")
			r = run(t, nil, append([]string{"--log-level", "warn", "cdi", "generate", "--output-dir", out}, rootArgs...)...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			r = run(t, nil, "cdi", "validate", "--spec-dir", out)
			if want.names == nil {
				require.Equal(t, ExitOK, r.code, r.stderr)
				require.Empty(t, r.stdout)
				require.Equal(t, "no spec files in "+out+"\n", r.stderr)
			} else {
				require.Equal(t, ExitOK, r.code, r.stderr)
				require.Empty(t, r.stderr)
				require.Equal(t, len(want.names), strings.Count(r.stdout, "ok "), r.stdout)
			}
			r = run(t, nil, "cdi", "list", "--spec-dir", out)
			require.Equal(t, ExitOK, r.code, r.stderr)
			require.Empty(t, r.stderr)
			require.Equal(t, strings.Join(want.names, "\n"), strings.TrimSpace(r.stdout))
		})
	}
}
