package drm_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// FuzzDiscover writes fuzzed sysfs attributes and a fuzzed driver link
// into one card of a real-looking tree and checks that discovery never
// fails, never reports half a card, and never disturbs the other card.
func FuzzDiscover(f *testing.F) {
	f.Add("226:0\n", "226:128\n", "0x8086\n", "-1\n", "../../../bus/pci/drivers/i915")
	f.Add("226:0", "226:129\n", "0x8086", "0", "i915")
	f.Add("garbage", "226:128\n", "0xzz\n", "x", "")
	f.Add("226:0\n", "226:128\n", "0x8086\n", "-1\n", "/")
	f.Add("226:0\n", "226:128\n", "0x8086\n", "-1\n", ".")
	drmtest.SkipUnlessRoot(f)
	tree := drmtest.MustBuild(f, drmtest.IntelIGPU, drmtest.AMDdGPU.WithNodes(1, 129))
	roots := tree.Roots()
	parent, err := tree.DevicePath(drmtest.IntelIGPU.ID())
	require.NoError(f, err)
	class := filepath.Join(roots.Sysfs, "class", "drm")

	f.Fuzz(func(t *testing.T, cardDev, renderDev, vendor, numa, driver string) {
		if strings.ContainsRune(driver, 0) || len(driver) > 256 {
			return
		}
		write := func(path, content string) {
			require.NoError(t, os.RemoveAll(path))
			require.NoError(t, os.WriteFile(path, []byte(content), 0o444))
		}
		write(filepath.Join(parent, "drm", "card0", "dev"), cardDev)
		write(filepath.Join(parent, "drm", "renderD128", "dev"), renderDev)
		write(filepath.Join(parent, "vendor"), vendor)
		write(filepath.Join(parent, "numa_node"), numa)
		require.NoError(t, os.RemoveAll(filepath.Join(parent, "driver")))
		if driver != "" {
			require.NoError(t, os.Symlink(driver, filepath.Join(parent, "driver")))
		}

		inv, err := drm.Discover(roots)
		require.NoError(t, err)
		var intel *drm.Card
		ids := []string{}
		for i, c := range inv.Cards {
			ids = append(ids, c.ID)
			if c.ID == drmtest.IntelIGPU.ID() {
				intel = &inv.Cards[i]
			}
		}
		require.Contains(t, ids, drmtest.AMDdGPU.ID())
		if intel == nil {
			require.Len(t, inv.Skipped, 2)
			for i, name := range []string{"card0", "renderD128"} {
				require.True(t, strings.HasPrefix(inv.Skipped[i].Error(), "skip DRM entry "+filepath.Join(class, name)+": "), inv.Skipped[i].Error())
			}
			return
		}
		require.Empty(t, inv.Skipped)
		major, minor, err := drm.ParseDev(cardDev)
		require.NoError(t, err)
		require.Equal(t, [2]uint32{226, 0}, [2]uint32{major, minor})
		major, minor, err = drm.ParseDev(renderDev)
		require.NoError(t, err)
		require.Equal(t, [2]uint32{226, 128}, [2]uint32{major, minor})
		require.NotNil(t, intel.RenderNode)
		id, err := drm.ParseHexID(vendor)
		require.NoError(t, err)
		require.Equal(t, id, intel.VendorID)
		n, err := drm.ParseNUMANode(numa)
		require.NoError(t, err)
		require.Equal(t, n, intel.NUMANode)
		require.NotEmpty(t, intel.Driver)
		require.NotContains(t, intel.Driver, "/")
	})
}
