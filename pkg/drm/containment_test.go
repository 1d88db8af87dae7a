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

// TestDiscoverRelativeLinkOutOfRoot leads class and device links out of
// the sysfs root with relative targets, whose leading ".." the resolver
// folds into the link's directory, and through prefixes an earlier
// entry of the pass has already resolved. The target is a complete
// device in "sys-outside", a sibling of the root whose name the root's
// is a prefix of, so only the containment check can refuse it.
func TestDiscoverRelativeLinkOutOfRoot(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	const intel, amd = "0000:00:02.0", "0000:03:00.0"
	good := drmtest.AMDdGPU.WithNodes(1, 129)

	// outsideCard makes <root>/sys-outside/<name> holding a copy of the
	// card's dev file and returns it.
	outsideCard := func(t *testing.T, tree *drmtest.Tree, card, name string) string {
		dir := filepath.Join(tree.Root(), "sys-outside", name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		dev, err := os.ReadFile(filepath.Join(card, "dev"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "dev"), dev, 0o444))
		return dir
	}
	// relLink replaces link with a relative symlink to target.
	relLink := func(t *testing.T, link, target string) {
		rel, err := filepath.Rel(filepath.Dir(link), target)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(rel, "../"), rel)
		replaceLink(t, link, rel)
	}
	// outsideDevice makes <root>/sys-outside/<id>, a PCI device with
	// every attribute a card's parent has, and returns it.
	outsideDevice := func(t *testing.T, tree *drmtest.Tree, parent, id string) string {
		dir := filepath.Join(tree.Root(), "sys-outside", id)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for _, attr := range []string{"vendor", "device", "numa_node"} {
			b, err := os.ReadFile(filepath.Join(parent, attr))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, attr), b, 0o444))
		}
		for _, link := range []string{"subsystem", "driver"} {
			target, err := os.Readlink(filepath.Join(parent, link))
			require.NoError(t, err)
			require.NoError(t, os.Symlink(target, filepath.Join(dir, link)))
		}
		return dir
	}

	third := drmtest.IntelXe.WithNodes(2, 130).WithPCI("0000:04:00.0")
	tests := map[string]struct {
		gpus    []drmtest.GPU // default: IntelIGPU and good
		mutate  func(t *testing.T, tree *drmtest.Tree, class string)
		wantIDs []string
		skipped map[string]error
	}{
		"class link, first entry of the pass": {
			mutate: func(t *testing.T, tree *drmtest.Tree, class string) {
				parent, err := tree.DevicePath(intel)
				require.NoError(t, err)
				out := outsideCard(t, tree, filepath.Join(parent, "drm", "card0"), "card0")
				relLink(t, filepath.Join(class, "card0"), out)
			},
			wantIDs: []string{amd},
			skipped: map[string]error{"card0": drm.ErrOutsideRoot, "renderD128": drm.ErrUnpaired},
		},
		"class link through resolved prefixes and back up": {
			// card1 comes after card0 in class/drm: /devices and
			// pci0000:00 are cached when its target walks them and
			// climbs out with "..".
			mutate: func(t *testing.T, tree *drmtest.Tree, class string) {
				parent, err := tree.DevicePath(amd)
				require.NoError(t, err)
				out := outsideCard(t, tree, filepath.Join(parent, "drm", "card1"), "card1")
				rel, err := filepath.Rel(tree.Roots().Sysfs, out)
				require.NoError(t, err)
				replaceLink(t, filepath.Join(class, "card1"), "../../devices/pci0000:00/../../"+rel)
			},
			wantIDs: []string{intel},
			skipped: map[string]error{"card1": drm.ErrOutsideRoot, "renderD129": drm.ErrUnpaired},
		},
		"class link read through the class directory's descriptor": {
			// card2 is the third entry of class/drm, the use that
			// opens the directory: its link is read relative to it.
			gpus: []drmtest.GPU{drmtest.IntelIGPU, good, third},
			mutate: func(t *testing.T, tree *drmtest.Tree, class string) {
				parent, err := tree.DevicePath(third.ID())
				require.NoError(t, err)
				out := outsideCard(t, tree, filepath.Join(parent, "drm", "card2"), "card2")
				relLink(t, filepath.Join(class, "card2"), out)
			},
			wantIDs: []string{intel, amd},
			skipped: map[string]error{"card2": drm.ErrOutsideRoot, "renderD130": drm.ErrUnpaired},
		},
		"device link of a card whose directory is resolved": {
			mutate: func(t *testing.T, tree *drmtest.Tree, class string) {
				parent, err := tree.DevicePath(amd)
				require.NoError(t, err)
				out := outsideDevice(t, tree, parent, amd)
				relLink(t, filepath.Join(parent, "drm", "card1", "device"), out)
			},
			wantIDs: []string{intel},
			skipped: map[string]error{"card1": drm.ErrOutsideRoot, "renderD129": drm.ErrSibling},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gpus := tc.gpus
			if gpus == nil {
				gpus = []drmtest.GPU{drmtest.IntelIGPU, good}
			}
			tree := drmtest.MustBuild(t, gpus...)
			class := filepath.Join(tree.Roots().Sysfs, "class", "drm")
			tc.mutate(t, tree, class)
			inv, err := drm.Discover(tree.Roots())
			require.NoError(t, err)
			var ids []string
			for _, c := range inv.Cards {
				ids = append(ids, c.ID)
			}
			require.Equal(t, tc.wantIDs, ids)
			require.Len(t, inv.Skipped, len(tc.skipped), "%v", inv.Skipped)
			for entry, is := range tc.skipped {
				prefix := "skip DRM entry " + filepath.Join(class, entry) + ": "
				found := false
				for _, e := range inv.Skipped {
					if strings.HasPrefix(e.Error(), prefix) {
						found = true
						require.ErrorIs(t, e, is)
						if is == drm.ErrOutsideRoot {
							require.Contains(t, e.Error(), filepath.Join(tree.Root(), "sys-outside"))
						}
					}
				}
				require.True(t, found, "no error for %s in %v", entry, inv.Skipped)
			}
		})
	}
}
