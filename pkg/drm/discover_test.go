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
	s := fmt.Sprintf("%s %s driver=%s bus=%s pci=%s:%s@%s numa=%d sysfs=%s",
		c.ID, c.Name, c.Driver, c.Bus, c.VendorID, c.DeviceID, c.PCIAddress, c.NUMANode,
		rel(c.SysfsPath))
	if c.HasCardNode() {
		s += " card=" + node(c.CardNode)
	}
	if c.RenderNode != nil {
		s += " render=" + node(*c.RenderNode)
	}
	if c.AccelNode != nil {
		s += " accel=" + node(*c.AccelNode)
	}
	for _, n := range c.Extra {
		s += " extra=" + node(n)
	}
	for _, n := range c.ByPath {
		s += " bypath=" + node(n)
	}
	return s
}

func discover(t testing.TB, tree *drmtest.Tree) *drm.Inventory {
	t.Helper()
	inv, err := drm.Discover(tree.Roots())
	require.NoError(t, err)
	return inv
}

func TestDiscover(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	const (
		igpu   = "0000:00:02.0 card0 driver=i915 bus=pci pci=8086:7d55@0000:00:02.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:02.0 card=/dev/dri/card0=dev/dri/card0@226:0 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:00:02.0-card=dev/dri/by-path/pci-0000:00:02.0-card@226:0 bypath=/dev/dri/by-path/pci-0000:00:02.0-render=dev/dri/by-path/pci-0000:00:02.0-render@226:128"
		igpu1  = "0000:00:02.0 card1 driver=i915 bus=pci pci=8086:7d55@0000:00:02.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:02.0 card=/dev/dri/card1=dev/dri/card1@226:1 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:00:02.0-card=dev/dri/by-path/pci-0000:00:02.0-card@226:1 bypath=/dev/dri/by-path/pci-0000:00:02.0-render=dev/dri/by-path/pci-0000:00:02.0-render@226:128"
		xe     = "0000:03:00.0 card0 driver=xe bus=pci pci=8086:e20b@0000:03:00.0 numa=0 sysfs=sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0 card=/dev/dri/card0=dev/dri/card0@226:0 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:03:00.0-card=dev/dri/by-path/pci-0000:03:00.0-card@226:0 bypath=/dev/dri/by-path/pci-0000:03:00.0-render=dev/dri/by-path/pci-0000:03:00.0-render@226:128"
		amd    = "0000:03:00.0 card0 driver=amdgpu bus=pci pci=1002:744c@0000:03:00.0 numa=0 sysfs=sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0 card=/dev/dri/card0=dev/dri/card0@226:0 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:03:00.0-card=dev/dri/by-path/pci-0000:03:00.0-card@226:0 bypath=/dev/dri/by-path/pci-0000:03:00.0-render=dev/dri/by-path/pci-0000:03:00.0-render@226:128"
		virtio = "0000:00:04.0 card0 driver=virtio_gpu bus=virtio pci=1af4:1050@0000:00:04.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:04.0/virtio1 card=/dev/dri/card0=dev/dri/card0@226:0 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:00:04.0-card=dev/dri/by-path/pci-0000:00:04.0-card@226:0 bypath=/dev/dri/by-path/pci-0000:00:04.0-render=dev/dri/by-path/pci-0000:00:04.0-render@226:128"
		vkms   = "vkms card0 driver=vkms bus=platform pci=:@ numa=-1 sysfs=sys/devices/platform/vkms card=/dev/dri/card0=dev/dri/card0@226:0 bypath=/dev/dri/by-path/platform-vkms-card=dev/dri/by-path/platform-vkms-card@226:0"
		ast    = "0000:02:00.0 card0 driver=ast bus=pci pci=1a03:2000@0000:02:00.0 numa=0 sysfs=sys/devices/pci0000:00/0000:00:01.0/0000:02:00.0 card=/dev/dri/card0=dev/dri/card0@226:0 bypath=/dev/dri/by-path/pci-0000:02:00.0-card=dev/dri/by-path/pci-0000:02:00.0-card@226:0"
		// hybrid laptop: the dGPU probed first and took card0, but the
		// iGPU's render node came first.
		hybridAMD = "0000:03:00.0 card0 driver=amdgpu bus=pci pci=1002:744c@0000:03:00.0 numa=0 sysfs=sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0 card=/dev/dri/card0=dev/dri/card0@226:0 render=/dev/dri/renderD129=dev/dri/renderD129@226:129 bypath=/dev/dri/by-path/pci-0000:03:00.0-card=dev/dri/by-path/pci-0000:03:00.0-card@226:0 bypath=/dev/dri/by-path/pci-0000:03:00.0-render=dev/dri/by-path/pci-0000:03:00.0-render@226:129"
		simple0   = "simple-framebuffer.0 card0 driver=simple-framebuffer bus=platform pci=:@ numa=-1 sysfs=sys/devices/platform/simple-framebuffer.0 card=/dev/dri/card0=dev/dri/card0@226:0 bypath=/dev/dri/by-path/platform-simple-framebuffer.0-card=dev/dri/by-path/platform-simple-framebuffer.0-card@226:0"
	)
	tests := map[string]struct {
		gpus []drmtest.GPU
		want []string
	}{
		"no GPU":                {want: []string{}},
		"i915":                  {gpus: []drmtest.GPU{drmtest.IntelIGPU}, want: []string{igpu}},
		"xe":                    {gpus: []drmtest.GPU{drmtest.IntelXe}, want: []string{xe}},
		"amdgpu+kfd":            {gpus: []drmtest.GPU{drmtest.AMDdGPU}, want: []string{amd}},
		"virtio-gpu":            {gpus: []drmtest.GPU{drmtest.VirtioGPU}, want: []string{virtio}},
		"vkms":                  {gpus: []drmtest.GPU{drmtest.VKMS}, want: []string{vkms}},
		"display-only PCI card": {gpus: []drmtest.GPU{drmtest.ASpeedBMC}, want: []string{ast}},
		"hybrid iGPU+dGPU, card and render numbers cross": {
			gpus: []drmtest.GPU{drmtest.AMDdGPU.WithNodes(0, 129), drmtest.IntelIGPU.WithNodes(1, 128)},
			want: []string{igpu1, hybridAMD},
		},
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
	require.Equal(t, c.RenderNode.GID, c.ByPath[1].GID)
}

func TestDiscoverSixteenCards(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	gpus := drmtest.Mixed(16)
	// Render numbers run against card numbers: only the parent device
	// can pair them.
	for i := range gpus {
		gpus[i].Render = 128 + len(gpus) - 1 - i
	}
	tree := drmtest.MustBuild(t, gpus...)
	inv := discover(t, tree)
	require.Empty(t, inv.Skipped)
	require.Len(t, inv.Cards, 16)
	byID := map[string]drm.Card{}
	for i, c := range inv.Cards {
		if i > 0 {
			require.Less(t, inv.Cards[i-1].ID, c.ID)
		}
		byID[c.ID] = c
	}
	for _, g := range gpus {
		c, ok := byID[g.ID()]
		require.True(t, ok, g.ID())
		require.Equal(t, fmt.Sprintf("card%d", g.Card), c.Name)
		require.Equal(t, uint32(g.Card), c.CardNode.Minor)
		require.NotNil(t, c.RenderNode, g.ID())
		require.Equal(t, uint32(g.Render), c.RenderNode.Minor, g.ID())
		require.Equal(t, fmt.Sprintf("/dev/dri/renderD%d", g.Render), c.RenderNode.Path)
		require.Equal(t, g.Driver, c.Driver)
		require.Empty(t, c.Extra, g.ID())
		require.Len(t, c.ByPath, 2)
	}
}

func TestDiscoverIgnoresNonNodes(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	tree := drmtest.MustBuild(t, drmtest.IntelIGPU)
	class := filepath.Join(tree.Roots().Sysfs, "class", "drm")
	// Entries a real class/drm holds besides nodes, and names that only
	// look like nodes; each would fail discovery if it were read.
	require.FileExists(t, filepath.Join(class, "version"))
	require.FileExists(t, filepath.Join(class, "card0-DP-1", "status"))
	for _, name := range []string{"controlD64", "card", "cardX", "card01", "renderD", "renderD-1", "card0-eDP-2", "ttm"} {
		require.NoError(t, os.Symlink("nowhere", filepath.Join(class, name)))
	}
	inv := discover(t, tree)
	require.Empty(t, inv.Skipped)
	require.Len(t, inv.Cards, 1)
	require.Equal(t, "card0", inv.Cards[0].Name)
}

func TestDiscoverLayouts(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	tests := map[string]struct {
		gpus   []drmtest.GPU
		mutate func(t *testing.T, tree *drmtest.Tree)
		check  func(t *testing.T, tree *drmtest.Tree, inv *drm.Inventory)
	}{
		"missing numa_node is unknown": {
			gpus: []drmtest.GPU{drmtest.IntelXe},
			mutate: func(t *testing.T, tree *drmtest.Tree) {
				dir, err := tree.DevicePath(drmtest.IntelXe.ID())
				require.NoError(t, err)
				require.NoError(t, os.Remove(filepath.Join(dir, "numa_node")))
			},
			check: func(t *testing.T, _ *drmtest.Tree, inv *drm.Inventory) {
				require.Equal(t, -1, inv.Cards[0].NUMANode)
			},
		},
		"numa node of a second socket": {
			gpus: []drmtest.GPU{drmtest.IntelXe.WithNUMA(1)},
			check: func(t *testing.T, _ *drmtest.Tree, inv *drm.Inventory) {
				require.Equal(t, 1, inv.Cards[0].NUMANode)
			},
		},
		"upper-case hex ids are reported lower-case": {
			gpus: []drmtest.GPU{drmtest.AMDdGPU},
			mutate: func(t *testing.T, tree *drmtest.Tree) {
				dir, err := tree.DevicePath(drmtest.AMDdGPU.ID())
				require.NoError(t, err)
				replaceFile(t, filepath.Join(dir, "device"), "0x744C\n")
			},
			check: func(t *testing.T, _ *drmtest.Tree, inv *drm.Inventory) {
				require.Equal(t, "744c", inv.Cards[0].DeviceID)
			},
		},
		"stale and foreign by-path links are ignored": {
			gpus: []drmtest.GPU{drmtest.IntelIGPU},
			mutate: func(t *testing.T, tree *drmtest.Tree) {
				bp := filepath.Join(tree.Roots().Dev, "dri", "by-path")
				require.NoError(t, os.Symlink("../card7", filepath.Join(bp, "pci-0000:00:07.0-card")))
				require.NoError(t, os.Symlink("loop", filepath.Join(bp, "loop")))
				require.NoError(t, os.WriteFile(filepath.Join(bp, "not-a-link"), nil, 0o644))
				require.NoError(t, os.Symlink("../../kmsg", filepath.Join(bp, "platform-x-card")))
			},
			check: func(t *testing.T, _ *drmtest.Tree, inv *drm.Inventory) {
				require.Len(t, inv.Cards[0].ByPath, 2)
				require.Equal(t, "/dev/dri/by-path/pci-0000:00:02.0-card", inv.Cards[0].ByPath[0].Path)
				require.Equal(t, "/dev/dri/by-path/pci-0000:00:02.0-render", inv.Cards[0].ByPath[1].Path)
			},
		},
		"kfd that is not a char device is left out": {
			gpus: []drmtest.GPU{drmtest.AMDdGPU},
			mutate: func(t *testing.T, tree *drmtest.Tree) {
				replaceFile(t, filepath.Join(tree.Roots().Dev, "kfd"), "")
			},
			check: func(t *testing.T, _ *drmtest.Tree, inv *drm.Inventory) {
				require.Empty(t, inv.Cards[0].Extra)
				require.NotNil(t, inv.Cards[0].RenderNode)
			},
		},
		"discovery attaches no companion, not even amdgpu's kfd": {
			gpus: []drmtest.GPU{drmtest.AMDdGPU, drmtest.IntelIGPU.WithNodes(1, 129)},
			check: func(t *testing.T, _ *drmtest.Tree, inv *drm.Inventory) {
				require.Equal(t, "amdgpu", inv.Cards[1].Driver)
				require.Empty(t, inv.Cards[0].Extra)
				require.Empty(t, inv.Cards[1].Extra)
			},
		},
		"faux vkms is named after its device": {
			gpus: []drmtest.GPU{drmtest.VKMS},
			mutate: func(t *testing.T, tree *drmtest.Tree) {
				dir, err := tree.DevicePath("vkms")
				require.NoError(t, err)
				sys := tree.Roots().Sysfs
				require.NoError(t, os.MkdirAll(filepath.Join(sys, "bus", "faux", "drivers", "faux_driver"), 0o755))
				replaceLink(t, filepath.Join(dir, "subsystem"), "../../../bus/faux")
				require.NoError(t, os.Symlink("../../../bus/faux/drivers/faux_driver", filepath.Join(dir, "driver")))
			},
			check: func(t *testing.T, _ *drmtest.Tree, inv *drm.Inventory) {
				require.Equal(t, "vkms", inv.Cards[0].ID)
				require.Equal(t, "vkms", inv.Cards[0].Driver)
				require.Equal(t, "faux", inv.Cards[0].Bus)
			},
		},
		"virtio-mmio card is named after its transport": {
			gpus: []drmtest.GPU{{Driver: "virtio_gpu", Platform: "a003e00.virtio_mmio", Card: 0, Render: 128}},
			mutate: func(t *testing.T, tree *drmtest.Tree) {
				// Move the DRM device below a virtio0 child, as virtio-mmio
				// lays it out.
				dir, err := tree.DevicePath("a003e00.virtio_mmio")
				require.NoError(t, err)
				sys := tree.Roots().Sysfs
				vdev := filepath.Join(dir, "virtio0")
				require.NoError(t, os.MkdirAll(vdev, 0o755))
				require.NoError(t, os.Rename(filepath.Join(dir, "drm"), filepath.Join(vdev, "drm")))
				require.NoError(t, os.Rename(filepath.Join(dir, "driver"), filepath.Join(vdev, "driver")))
				replaceLink(t, filepath.Join(vdev, "driver"), "../../../../bus/virtio/drivers/virtio_gpu")
				require.NoError(t, os.MkdirAll(filepath.Join(sys, "bus", "virtio", "drivers", "virtio_gpu"), 0o755))
				require.NoError(t, os.Symlink("../../../../bus/virtio", filepath.Join(vdev, "subsystem")))
				for _, n := range []string{"card0", "renderD128"} {
					replaceLink(t, filepath.Join(vdev, "drm", n, "device"), "../../../virtio0")
					replaceLink(t, filepath.Join(sys, "class", "drm", n), "../../devices/platform/a003e00.virtio_mmio/virtio0/drm/"+n)
				}
			},
			check: func(t *testing.T, tree *drmtest.Tree, inv *drm.Inventory) {
				c := inv.Cards[0]
				require.Equal(t, "a003e00.virtio_mmio", c.ID)
				require.Equal(t, "virtio_gpu", c.Driver)
				require.Equal(t, "virtio", c.Bus)
				require.Empty(t, c.PCIAddress)
				require.Equal(t, filepath.Join(tree.Roots().Sysfs, "devices", "platform", "a003e00.virtio_mmio", "virtio0"), c.SysfsPath)
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tree := drmtest.MustBuild(t, tc.gpus...)
			if tc.mutate != nil {
				tc.mutate(t, tree)
			}
			inv := discover(t, tree)
			require.Empty(t, inv.Skipped)
			require.Len(t, inv.Cards, len(tc.gpus))
			tc.check(t, tree, inv)
		})
	}
}

// The sysfs root may be reached through a symlink (a host /sys mounted
// somewhere); SysfsPath must stay below the root as given, and relative
// roots work from the current directory.
func TestDiscoverRootThroughSymlink(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	tree := drmtest.MustBuild(t, drmtest.IntelIGPU)
	alias := filepath.Join(t.TempDir(), "host")
	require.NoError(t, os.Mkdir(alias, 0o755))
	require.NoError(t, os.Symlink(tree.Roots().Sysfs, filepath.Join(alias, "sys")))
	require.NoError(t, os.Symlink(tree.Roots().Dev, filepath.Join(alias, "dev")))
	inv, err := drm.Discover(drm.Roots{Sysfs: filepath.Join(alias, "sys"), Dev: filepath.Join(alias, "dev")})
	require.NoError(t, err)
	require.Empty(t, inv.Skipped)
	require.Len(t, inv.Cards, 1)
	c := inv.Cards[0]
	require.Equal(t, filepath.Join(alias, "sys", "devices", "pci0000:00", "0000:00:02.0"), c.SysfsPath)
	require.DirExists(t, c.SysfsPath)
	require.Equal(t, filepath.Join(alias, "dev", "dri", "card0"), c.CardNode.HostPath)
	require.Len(t, c.ByPath, 2)
	require.Equal(t, filepath.Join(alias, "dev", "dri", "by-path", "pci-0000:00:02.0-card"), c.ByPath[0].HostPath)

	t.Chdir(alias)
	inv, err = drm.Discover(drm.Roots{Sysfs: "sys", Dev: "dev"})
	require.NoError(t, err)
	require.Len(t, inv.Cards, 1)
	require.Equal(t, c, inv.Cards[0])
}
