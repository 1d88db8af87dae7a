package drmtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// TestChangeOrder checks that every change does the kernel's part (sysfs)
// completely before udev's (dev), as on a host: a watcher of the dev tree
// then sees its last event only after sysfs has settled, and rescans a
// complete tree.
func TestChangeOrder(t *testing.T) {
	SkipUnlessRoot(t)
	amd := AMDdGPU.WithNodes(1, 129)
	tree := MustBuild(t, IntelIGPU.WithNodes(0, 128))
	sys, dev := tree.Roots().Sysfs, tree.Roots().Dev
	parent := filepath.Join(sys, "devices", "pci0000:00", "0000:00:01.0", amd.PCIAddress)
	sysfsEntries := []string{
		filepath.Join(sys, "class", "drm", "card1"),
		filepath.Join(sys, "class", "drm", "renderD129"),
		filepath.Join(parent, "driver"),
	}
	devEntries := []string{
		filepath.Join(dev, "dri", "card1"),
		filepath.Join(dev, "dri", "renderD129"),
		filepath.Join(dev, "dri", "by-path", "pci-"+amd.PCIAddress+"-card"),
		filepath.Join(dev, "dri", "by-path", "pci-"+amd.PCIAddress+"-render"),
		filepath.Join(dev, "kfd"),
	}
	exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }

	var calls []string
	tree.afterKernel = func(op string, g GPU) {
		calls = append(calls, op+" "+g.ID())
		inv, err := drm.Discover(tree.Roots())
		require.NoError(t, err)
		switch op {
		case "bind":
			for _, p := range sysfsEntries {
				require.True(t, exists(p), "%s: sysfs entry %s not there before udev's part", op, p)
			}
			for _, p := range devEntries {
				require.False(t, exists(p), "%s: dev entry %s made before the kernel's part was done", op, p)
			}
			// Discovery at this moment skips the card for its missing
			// nodes, as on a host before udev has run.
			require.Len(t, inv.Cards, 1)
			require.NotEmpty(t, inv.Skipped)
		case "unbind", "remove":
			for _, p := range sysfsEntries {
				require.False(t, exists(p), "%s: sysfs entry %s still there when udev's part starts", op, p)
			}
			require.Equal(t, op == "unbind", exists(parent), "%s: device directory", op)
			for _, p := range devEntries {
				require.True(t, exists(p), "%s: dev entry %s removed before the kernel's part was done", op, p)
			}
			require.Len(t, inv.Cards, 1)
			require.Empty(t, inv.Skipped)
		}
	}
	require.NoError(t, tree.Add(amd))
	require.NoError(t, tree.Unbind(amd.ID()))
	require.NoError(t, tree.Rebind(amd.ID()))
	require.NoError(t, tree.Remove(amd.ID()))
	require.Equal(t, []string{"bind " + amd.ID(), "unbind " + amd.ID(), "bind " + amd.ID(), "remove " + amd.ID()}, calls)
	for _, p := range append(sysfsEntries, devEntries...) {
		require.False(t, exists(p), p)
	}
}
