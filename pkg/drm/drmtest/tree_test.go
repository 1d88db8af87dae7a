package drmtest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

func ids(t *testing.T, tree *drmtest.Tree) []string {
	t.Helper()
	inv, err := drm.Discover(tree.Roots())
	require.NoError(t, err)
	require.Empty(t, inv.Skipped)
	out := []string{}
	for _, c := range inv.Cards {
		out = append(out, c.ID)
	}
	return out
}

// requireRead checks that read gives want[p] for each path p below root.
func requireRead(t *testing.T, read func(string) (string, error), root string, want map[string]string) {
	t.Helper()
	for p, w := range want {
		got, err := read(filepath.Join(root, p))
		require.NoError(t, err, p)
		require.Equal(t, w, got, p)
	}
}

func readString(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

func TestLayout(t *testing.T) {
	tree := drmtest.MustBuild(t, drmtest.IntelIGPU.WithNodes(1, 128), drmtest.VirtioGPU.WithNodes(0, 129), drmtest.VKMS.WithNodes(2, -1))
	sys, dev := tree.Roots().Sysfs, tree.Roots().Dev
	links := map[string]string{
		"class/drm/card1":                                   "../../devices/pci0000:00/0000:00:02.0/drm/card1",
		"class/drm/renderD128":                              "../../devices/pci0000:00/0000:00:02.0/drm/renderD128",
		"class/drm/card1-DP-1":                              "../../devices/pci0000:00/0000:00:02.0/drm/card1/card1-DP-1",
		"class/drm/card0":                                   "../../devices/pci0000:00/0000:00:04.0/virtio1/drm/card0",
		"class/drm/card2":                                   "../../devices/platform/vkms/drm/card2",
		"devices/pci0000:00/0000:00:02.0/driver":            "../../../bus/pci/drivers/i915",
		"devices/pci0000:00/0000:00:02.0/subsystem":         "../../../bus/pci",
		"devices/pci0000:00/0000:00:02.0/drm/card1/device":  "../../../0000:00:02.0",
		"devices/pci0000:00/0000:00:04.0/driver":            "../../../bus/pci/drivers/virtio-pci",
		"devices/pci0000:00/0000:00:04.0/virtio1/driver":    "../../../../bus/virtio/drivers/virtio_gpu",
		"devices/pci0000:00/0000:00:04.0/virtio1/subsystem": "../../../../bus/virtio",
		"devices/platform/vkms/subsystem":                   "../../../bus/platform",
		"bus/pci/devices/0000:00:02.0":                      "../../../devices/pci0000:00/0000:00:02.0",
	}
	requireRead(t, os.Readlink, sys, links)
	files := map[string]string{
		"class/drm/version":                                          "drm 1.1.0 20060810\n",
		"devices/pci0000:00/0000:00:02.0/vendor":                     "0x8086\n",
		"devices/pci0000:00/0000:00:02.0/device":                     "0x7d55\n",
		"devices/pci0000:00/0000:00:02.0/numa_node":                  "-1\n",
		"devices/pci0000:00/0000:00:02.0/drm/card1/dev":              "226:1\n",
		"devices/pci0000:00/0000:00:04.0/vendor":                     "0x1af4\n",
		"devices/pci0000:00/0000:00:04.0/virtio1/device":             "0x0010\n",
		"devices/pci0000:00/0000:00:04.0/virtio1/drm/renderD129/dev": "226:129\n",
	}
	requireRead(t, readString, sys, files)
	_, err := os.Lstat(filepath.Join(sys, "devices/platform/vkms/driver"))
	require.ErrorIs(t, err, os.ErrNotExist, "vkms has no driver link")
	got, err := os.Readlink(filepath.Join(dev, "dri/by-path/pci-0000:00:02.0-render"))
	require.NoError(t, err)
	require.Equal(t, "../renderD128", got)
	require.FileExists(t, filepath.Join(dev, "dri/by-path/pci-0000:00:04.0-card"))
	require.FileExists(t, filepath.Join(dev, "dri/by-path/platform-vkms-card"))
	fi, err := os.Lstat(filepath.Join(dev, "dri/renderD129"))
	require.NoError(t, err)
	if tree.CharNodes() {
		require.Equal(t, os.ModeDevice|os.ModeCharDevice, fi.Mode().Type())
	} else {
		require.True(t, fi.Mode().IsRegular())
	}
	require.Equal(t, os.FileMode(drmtest.NodeMode), fi.Mode().Perm())
}

func TestLiveChanges(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	amd := drmtest.AMDdGPU
	amd2 := drmtest.AMDdGPU.WithPCI("0000:04:00.0").WithNodes(2, 130)
	tree := drmtest.MustBuild(t, drmtest.Simpledrm, drmtest.IntelIGPU.WithNodes(1, 128))
	dev := tree.Roots().Dev
	require.Equal(t, []string{"0000:00:02.0", "simple-framebuffer.0"}, ids(t, tree))

	require.NoError(t, tree.Add(amd.WithNodes(3, 129)))
	require.NoError(t, tree.Add(amd2))
	require.Equal(t, []string{"0000:00:02.0", "0000:03:00.0", "0000:04:00.0", "simple-framebuffer.0"}, ids(t, tree))
	require.FileExists(t, filepath.Join(dev, "kfd"))

	dir, err := tree.DevicePath(amd.ID())
	require.NoError(t, err)
	require.NoError(t, tree.Unbind(amd.ID()))
	require.Equal(t, []string{"0000:00:02.0", "0000:04:00.0", "simple-framebuffer.0"}, ids(t, tree))
	require.DirExists(t, dir, "unbind keeps the device")
	require.NoDirExists(t, filepath.Join(dir, "drm"))
	require.NoFileExists(t, filepath.Join(dev, "dri", "card3"))
	require.FileExists(t, filepath.Join(dev, "kfd"), "the other amdgpu still needs kfd")

	require.NoError(t, tree.Remove(amd2.ID()))
	require.NoFileExists(t, filepath.Join(dev, "kfd"))
	require.NoDirExists(t, filepath.Join(tree.Roots().Sysfs, "devices", "pci0000:00", "0000:00:01.0", "0000:04:00.0"))
	require.Equal(t, []string{"0000:00:02.0", "simple-framebuffer.0"}, ids(t, tree))

	require.NoError(t, tree.Rebind(amd.ID()))
	require.Equal(t, []string{"0000:00:02.0", "0000:03:00.0", "simple-framebuffer.0"}, ids(t, tree))
	require.FileExists(t, filepath.Join(dev, "kfd"))

	require.NoError(t, tree.Remove(drmtest.Simpledrm.ID()))
	require.Equal(t, []string{"0000:00:02.0", "0000:03:00.0"}, ids(t, tree))
	require.Len(t, tree.GPUs(), 2)
}

func TestTreeErrors(t *testing.T) {
	tree := drmtest.MustBuild(t, drmtest.IntelIGPU)
	tests := map[string]func() error{
		"same ID twice":   func() error { return tree.Add(drmtest.IntelIGPU.WithNodes(5, 133)) },
		"minor taken":     func() error { return tree.Add(drmtest.IntelXe) },
		"no ID":           func() error { return tree.Add(drmtest.GPU{Card: 3, Render: -1}) },
		"bad PCI address": func() error { return tree.Add(drmtest.GPU{PCIAddress: "02.0", Card: 3, Render: -1}) },
		"ID with a slash": func() error { return tree.Add(drmtest.GPU{Platform: "a/b", Card: 3, Render: -1}) },
		"unknown bus":     func() error { return tree.Add(drmtest.GPU{Bus: "usb", Platform: "1-1", Card: 3, Render: -1}) },
		"remove unknown":  func() error { return tree.Remove("0000:09:00.0") },
		"unbind unknown":  func() error { return tree.Unbind("0000:09:00.0") },
		"rebind unknown":  func() error { return tree.Rebind("0000:09:00.0") },
		"negative card":   func() error { return tree.Add(drmtest.GPU{Platform: "x", Card: -1, Render: -1}) },
		"platform with PCI": func() error {
			return tree.Add(drmtest.GPU{Bus: "platform", PCIAddress: "0000:05:00.0", Card: 3, Render: -1})
		},
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) {
			require.Error(t, fn())
		})
	}
	_, err := tree.DevicePath("nope")
	require.ErrorIs(t, err, drmtest.ErrUnknownGPU)
}

func TestPresets(t *testing.T) {
	for _, n := range []int{1, 16, 128} {
		for _, gpus := range [][]drmtest.GPU{drmtest.ManyIntel(n), drmtest.Mixed(n)} {
			require.Len(t, gpus, n)
			seen := map[string]bool{}
			for _, g := range gpus {
				require.False(t, seen[g.ID()], g.ID())
				seen[g.ID()] = true
			}
		}
	}
	require.Len(t, drmtest.Bench128(), 128)
}

func TestBench128Discovers(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	tree := drmtest.MustBuild(t, drmtest.Bench128()...)
	require.Len(t, ids(t, tree), 128)
}
