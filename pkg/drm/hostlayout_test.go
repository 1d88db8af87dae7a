package drm_test

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest/hostlayout"
)

// hostLayoutCards are the cards of each host layout, checked against the
// listings by hand: IDs from the PCI function (the transport for
// virtio-gpu) or the platform device, card and render node paired by
// device whatever their numbers, the driver link's name, NUMA from the
// PCI function, kfd for amdgpu, and udev's by-path links.
var hostLayoutCards = map[string][]string{
	"arm-rk3399": {
		"display-subsystem card0 driver=rockchip-drm bus=platform pci=:@ numa=-1 sysfs=sys/devices/platform/display-subsystem card=/dev/dri/card0=dev/dri/card0@226:0 bypath=/dev/dri/by-path/platform-display-subsystem-card=dev/dri/by-path/platform-display-subsystem-card@226:0",
		"ff9a0000.gpu card1 driver=panfrost bus=platform pci=:@ numa=-1 sysfs=sys/devices/platform/ff9a0000.gpu card=/dev/dri/card1=dev/dri/card1@226:1 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/platform-ff9a0000.gpu-card=dev/dri/by-path/platform-ff9a0000.gpu-card@226:1 bypath=/dev/dri/by-path/platform-ff9a0000.gpu-render=dev/dri/by-path/platform-ff9a0000.gpu-render@226:128",
	},
	"hybrid-laptop": {
		"0000:00:02.0 card1 driver=i915 bus=pci pci=8086:9a49@0000:00:02.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:02.0 card=/dev/dri/card1=dev/dri/card1@226:1 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:00:02.0-card=dev/dri/by-path/pci-0000:00:02.0-card@226:1 bypath=/dev/dri/by-path/pci-0000:00:02.0-render=dev/dri/by-path/pci-0000:00:02.0-render@226:128",
		"0000:03:00.0 card2 driver=amdgpu bus=pci pci=1002:73ff@0000:03:00.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0 card=/dev/dri/card2=dev/dri/card2@226:2 render=/dev/dri/renderD129=dev/dri/renderD129@226:129 extra=/dev/kfd=dev/kfd@237:0 bypath=/dev/dri/by-path/pci-0000:03:00.0-card=dev/dri/by-path/pci-0000:03:00.0-card@226:2 bypath=/dev/dri/by-path/pci-0000:03:00.0-render=dev/dri/by-path/pci-0000:03:00.0-render@226:129",
	},
	"hybrid-laptop-boot": {
		"0000:00:02.0 card1 driver=i915 bus=pci pci=8086:9a49@0000:00:02.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:02.0 card=/dev/dri/card1=dev/dri/card1@226:1 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:00:02.0-card=dev/dri/by-path/pci-0000:00:02.0-card@226:1 bypath=/dev/dri/by-path/pci-0000:00:02.0-render=dev/dri/by-path/pci-0000:00:02.0-render@226:128",
		"0000:03:00.0 card2 driver=amdgpu bus=pci pci=1002:73ff@0000:03:00.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0 card=/dev/dri/card2=dev/dri/card2@226:2 render=/dev/dri/renderD129=dev/dri/renderD129@226:129 extra=/dev/kfd=dev/kfd@237:0 bypath=/dev/dri/by-path/pci-0000:03:00.0-card=dev/dri/by-path/pci-0000:03:00.0-card@226:2 bypath=/dev/dri/by-path/pci-0000:03:00.0-render=dev/dri/by-path/pci-0000:03:00.0-render@226:129",
		"simple-framebuffer.0 card0 driver=simple-framebuffer bus=platform pci=:@ numa=-1 sysfs=sys/devices/platform/simple-framebuffer.0 card=/dev/dri/card0=dev/dri/card0@226:0 bypath=/dev/dri/by-path/platform-simple-framebuffer.0-card=dev/dri/by-path/platform-simple-framebuffer.0-card@226:0",
	},
	"hybrid-laptop-malformed": {
		"0000:00:02.0 card1 driver=i915 bus=pci pci=8086:9a49@0000:00:02.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:02.0 card=/dev/dri/card1=dev/dri/card1@226:1 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:00:02.0-card=dev/dri/by-path/pci-0000:00:02.0-card@226:1 bypath=/dev/dri/by-path/pci-0000:00:02.0-render=dev/dri/by-path/pci-0000:00:02.0-render@226:128",
		"0000:03:00.0 card2 driver=amdgpu bus=pci pci=1002:73ff@0000:03:00.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0 card=/dev/dri/card2=dev/dri/card2@226:2 render=/dev/dri/renderD129=dev/dri/renderD129@226:129 extra=/dev/kfd=dev/kfd@237:0 bypath=/dev/dri/by-path/pci-0000:03:00.0-card=dev/dri/by-path/pci-0000:03:00.0-card@226:2 bypath=/dev/dri/by-path/pci-0000:03:00.0-render=dev/dri/by-path/pci-0000:03:00.0-render@226:129",
	},
	"legacy-mgag200": {
		"0000:0a:00.0 card0 driver=mgag200 bus=pci pci=102b:0534@0000:0a:00.0 numa=0 sysfs=sys/devices/pci0000:00/0000:00:1c.7/0000:0a:00.0 card=/dev/dri/card0=dev/dri/card0@226:0 bypath=/dev/dri/by-path/pci-0000:0a:00.0-card=dev/dri/by-path/pci-0000:0a:00.0-card@226:0",
	},
	"qemu-virtio-gpu": {
		"0000:00:01.0 card0 driver=bochs-drm bus=pci pci=1234:1111@0000:00:01.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:01.0 card=/dev/dri/card0=dev/dri/card0@226:0 bypath=/dev/dri/by-path/pci-0000:00:01.0-card=dev/dri/by-path/pci-0000:00:01.0-card@226:0",
		"0000:00:02.0 card1 driver=virtio_gpu bus=virtio pci=1af4:1050@0000:00:02.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:02.0/virtio1 card=/dev/dri/card1=dev/dri/card1@226:1 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:00:02.0-card=dev/dri/by-path/pci-0000:00:02.0-card@226:1 bypath=/dev/dri/by-path/pci-0000:00:02.0-render=dev/dri/by-path/pci-0000:00:02.0-render@226:128",
	},
	"server-flex-bmc": {
		"0000:04:00.0 card0 driver=ast bus=pci pci=1a03:2000@0000:04:00.0 numa=0 sysfs=sys/devices/pci0000:00/0000:00:1c.5/0000:03:00.0/0000:04:00.0 card=/dev/dri/card0=dev/dri/card0@226:0 bypath=/dev/dri/by-path/pci-0000:04:00.0-card=dev/dri/by-path/pci-0000:04:00.0-card@226:0",
		"0000:4d:00.0 card2 driver=xe bus=pci pci=8086:56c0@0000:4d:00.0 numa=0 sysfs=sys/devices/pci0000:4a/0000:4a:02.0/0000:4b:00.0/0000:4c:01.0/0000:4d:00.0 card=/dev/dri/card2=dev/dri/card2@226:2 render=/dev/dri/renderD129=dev/dri/renderD129@226:129 bypath=/dev/dri/by-path/pci-0000:4d:00.0-card=dev/dri/by-path/pci-0000:4d:00.0-card@226:2 bypath=/dev/dri/by-path/pci-0000:4d:00.0-render=dev/dri/by-path/pci-0000:4d:00.0-render@226:129",
		"0000:ca:00.0 card1 driver=xe bus=pci pci=8086:56c0@0000:ca:00.0 numa=1 sysfs=sys/devices/pci0000:c7/0000:c7:02.0/0000:c8:00.0/0000:c9:01.0/0000:ca:00.0 card=/dev/dri/card1=dev/dri/card1@226:1 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:ca:00.0-card=dev/dri/by-path/pci-0000:ca:00.0-card@226:1 bypath=/dev/dri/by-path/pci-0000:ca:00.0-render=dev/dri/by-path/pci-0000:ca:00.0-render@226:128",
	},
}

func TestDiscoverHostLayouts(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	require.ElementsMatch(t, hostlayout.Names(), slices.Collect(maps.Keys(hostLayoutCards)), "every host layout needs expectations")
	for name, want := range hostLayoutCards {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			roots, err := hostlayout.Build(root, name)
			require.NoError(t, err)
			require.NoError(t, hostlayout.CheckLinks(root, name))
			inv, err := config.Default().Discover(roots)
			require.NoError(t, err)
			got := []string{}
			for _, c := range inv.Cards {
				got = append(got, summary(t, root, c))
			}
			require.Equal(t, want, got, "\n%s", strings.Join(got, "\n"))
			if name != "hybrid-laptop-malformed" {
				require.Empty(t, inv.Skipped)
			}
		})
	}
}

// TestDiscoverHostLayoutMalformed checks that every broken device of the
// malformed laptop is skipped with one error per class entry that names
// the entry and the reason, and that nothing else is skipped.
func TestDiscoverHostLayoutMalformed(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	root := t.TempDir()
	roots, err := hostlayout.Build(root, "hybrid-laptop-malformed")
	require.NoError(t, err)
	inv, err := drm.Discover(roots)
	require.NoError(t, err)

	class := filepath.Join(roots.Sysfs, "class", "drm")
	pci := filepath.Join(roots.Sysfs, "devices", "pci0000:00")
	tests := map[string]struct {
		is     error
		reason []string
	}{
		"card3":      {is: fs.ErrNotExist, reason: []string{filepath.Join(pci, "0000:00:07.0", "0000:05:00.0")}},
		"renderD130": {is: fs.ErrNotExist, reason: []string{filepath.Join(pci, "0000:00:07.0", "0000:05:00.0")}},
		"card4":      {is: drm.ErrSibling, reason: []string{"renderD131 of device " + filepath.Join(pci, "0000:00:06.0")}},
		"renderD131": {is: drm.ErrBadDev, reason: []string{filepath.Join(pci, "0000:00:06.0", "drm", "renderD131", "dev"), `"226:abc\n"`}},
		"card5":      {is: fs.ErrNotExist, reason: []string{filepath.Join(roots.Dev, "dri", "card5")}},
		"card6":      {is: syscall.ELOOP, reason: []string{"too many levels of symbolic links"}},
		"card7":      {is: drm.ErrNodeMismatch, reason: []string{filepath.Join(roots.Dev, "dri", "card7") + " is 226:9, sysfs says 226:7"}},
		"renderD132": {is: drm.ErrUnpaired, reason: []string{filepath.Join(pci, "0000:00:09.0") + " has 0 card, 1 render and 0 accel nodes"}},
		"card8":      {reason: []string{filepath.Join(pci, "0000:00:0a.0", "drm", "card8", "dev"), "not a regular file"}},
		"card9":      {is: drm.ErrOutsideRoot, reason: []string{filepath.Join(root, "dev", "dri")}},
	}
	require.Len(t, inv.Skipped, len(tests), "%v", inv.Skipped)
	for entry, tc := range tests {
		t.Run(entry, func(t *testing.T) {
			prefix := "skip DRM entry " + filepath.Join(class, entry) + ": "
			var found error
			for _, err := range inv.Skipped {
				if strings.HasPrefix(err.Error(), prefix) {
					require.Nil(t, found, "two errors for %s", entry)
					found = err
				}
			}
			require.NotNil(t, found, "no error names %s", entry)
			for _, r := range tc.reason {
				require.Contains(t, found.Error(), r)
			}
			if tc.is != nil {
				require.True(t, errors.Is(found, tc.is), "%v is not %v", found, tc.is)
			}
		})
	}
}

// TestDiscoverHostLayoutWithoutBus discovers host layouts copied without
// /sys/bus (the targets of every driver and subsystem link): the names
// are read from the links, and the result is the same.
func TestDiscoverHostLayoutWithoutBus(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	for _, name := range []string{"hybrid-laptop", "qemu-virtio-gpu", "arm-rk3399", "server-flex-bmc"} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			roots, err := hostlayout.Build(root, name)
			require.NoError(t, err)
			require.NoError(t, os.RemoveAll(filepath.Join(roots.Sysfs, "bus")))
			inv, err := config.Default().Discover(roots)
			require.NoError(t, err)
			require.Empty(t, inv.Skipped)
			got := []string{}
			for _, c := range inv.Cards {
				got = append(got, summary(t, root, c))
			}
			require.Equal(t, hostLayoutCards[name], got)
		})
	}
}
