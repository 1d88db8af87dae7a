package drm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// summary renders the facts of a card that the tables check, one line,
// with paths relative to the tree root.
func summary(t *testing.T, root string, c drm.Card) string {
	t.Helper()
	rel := func(p string) string {
		r, err := filepath.Rel(root, p)
		require.NoError(t, err)
		return r
	}
	node := func(n drm.DeviceNode) string {
		return fmt.Sprintf("%s=%s@%d:%d", n.Path, rel(n.HostPath), n.Major, n.Minor)
	}
	s := fmt.Sprintf("%s %s driver=%s bus=%s pci=%s:%s@%s numa=%d sysfs=%s card=%s",
		c.ID, c.Name, c.Driver, c.Bus, c.VendorID, c.DeviceID, c.PCIAddress, c.NUMANode,
		rel(c.SysfsPath), node(c.CardNode))
	if c.RenderNode != nil {
		s += " render=" + node(*c.RenderNode)
	}
	for _, n := range c.Extra {
		s += " extra=" + node(n)
	}
	for _, n := range c.ByPath {
		s += " bypath=" + node(n)
	}
	return s
}

func discover(t *testing.T, tree *drmtest.Tree) *drm.Inventory {
	t.Helper()
	inv, err := drm.Discover(tree.Roots())
	require.NoError(t, err)
	return inv
}

func TestDiscover(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	const (
		igpu    = "0000:00:02.0 card0 driver=i915 bus=pci pci=8086:7d55@0000:00:02.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:02.0 card=/dev/dri/card0=dev/dri/card0@226:0 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:00:02.0-card=dev/dri/by-path/pci-0000:00:02.0-card@226:0 bypath=/dev/dri/by-path/pci-0000:00:02.0-render=dev/dri/by-path/pci-0000:00:02.0-render@226:128"
		igpu1   = "0000:00:02.0 card1 driver=i915 bus=pci pci=8086:7d55@0000:00:02.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:02.0 card=/dev/dri/card1=dev/dri/card1@226:1 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:00:02.0-card=dev/dri/by-path/pci-0000:00:02.0-card@226:1 bypath=/dev/dri/by-path/pci-0000:00:02.0-render=dev/dri/by-path/pci-0000:00:02.0-render@226:128"
		xe      = "0000:03:00.0 card0 driver=xe bus=pci pci=8086:e20b@0000:03:00.0 numa=0 sysfs=sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0 card=/dev/dri/card0=dev/dri/card0@226:0 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:03:00.0-card=dev/dri/by-path/pci-0000:03:00.0-card@226:0 bypath=/dev/dri/by-path/pci-0000:03:00.0-render=dev/dri/by-path/pci-0000:03:00.0-render@226:128"
		amd     = "0000:03:00.0 card0 driver=amdgpu bus=pci pci=1002:744c@0000:03:00.0 numa=0 sysfs=sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0 card=/dev/dri/card0=dev/dri/card0@226:0 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 extra=/dev/kfd=dev/kfd@235:0 bypath=/dev/dri/by-path/pci-0000:03:00.0-card=dev/dri/by-path/pci-0000:03:00.0-card@226:0 bypath=/dev/dri/by-path/pci-0000:03:00.0-render=dev/dri/by-path/pci-0000:03:00.0-render@226:128"
		virtio  = "0000:00:04.0 card0 driver=virtio_gpu bus=virtio pci=1af4:1050@0000:00:04.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:04.0/virtio1 card=/dev/dri/card0=dev/dri/card0@226:0 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:00:04.0-card=dev/dri/by-path/pci-0000:00:04.0-card@226:0 bypath=/dev/dri/by-path/pci-0000:00:04.0-render=dev/dri/by-path/pci-0000:00:04.0-render@226:128"
		vkms    = "vkms card0 driver=vkms bus=platform pci=:@ numa=-1 sysfs=sys/devices/platform/vkms card=/dev/dri/card0=dev/dri/card0@226:0 bypath=/dev/dri/by-path/platform-vkms-card=dev/dri/by-path/platform-vkms-card@226:0"
		simple0 = "simple-framebuffer.0 card0 driver=simple-framebuffer bus=platform pci=:@ numa=-1 sysfs=sys/devices/platform/simple-framebuffer.0 card=/dev/dri/card0=dev/dri/card0@226:0 bypath=/dev/dri/by-path/platform-simple-framebuffer.0-card=dev/dri/by-path/platform-simple-framebuffer.0-card@226:0"
	)
	tests := map[string]struct {
		gpus []drmtest.GPU
		want []string
	}{
		"no GPU":     {want: []string{}},
		"i915":       {gpus: []drmtest.GPU{drmtest.IntelIGPU}, want: []string{igpu}},
		"xe":         {gpus: []drmtest.GPU{drmtest.IntelXe}, want: []string{xe}},
		"amdgpu+kfd": {gpus: []drmtest.GPU{drmtest.AMDdGPU}, want: []string{amd}},
		"virtio-gpu": {gpus: []drmtest.GPU{drmtest.VirtioGPU}, want: []string{virtio}},
		"vkms":       {gpus: []drmtest.GPU{drmtest.VKMS}, want: []string{vkms}},
		"simpledrm owns card0, i915 is card1 with renderD128": {
			gpus: []drmtest.GPU{drmtest.Simpledrm, drmtest.IntelIGPU.WithNodes(1, 128)},
			want: []string{igpu1, simple0},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tree := drmtest.MustBuild(t, tc.gpus...)
			inv := discover(t, tree)
			require.Empty(t, inv.Skipped)
			got := []string{}
			for _, c := range inv.Cards {
				got = append(got, summary(t, tree.Root(), c))
			}
			require.Equal(t, tc.want, got, "\n%s", strings.Join(got, "\n"))
		})
	}
}

func TestDiscoverMissingClass(t *testing.T) {
	inv, err := drm.Discover(drm.Roots{Sysfs: t.TempDir(), Dev: t.TempDir()})
	require.NoError(t, err)
	require.Empty(t, inv.Cards)
	require.Empty(t, inv.Skipped)
}

func TestDiscoverNodeOwner(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	tree := drmtest.MustBuild(t, drmtest.AMDdGPU)
	inv := discover(t, tree)
	require.Len(t, inv.Cards, 1)
	c := inv.Cards[0]
	require.Equal(t, os.FileMode(0o660), c.CardNode.Mode)
	require.Equal(t, uint32(drmtest.VideoGID), c.CardNode.GID)
	require.Equal(t, uint32(drmtest.RenderGID), c.RenderNode.GID)
	require.Equal(t, uint32(0), c.RenderNode.UID)
	require.Equal(t, uint32(drmtest.RenderGID), c.Extra[0].GID)
	require.Equal(t, c.RenderNode.GID, c.ByPath[1].GID)
}
