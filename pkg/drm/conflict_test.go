package drm_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// claimMinor makes the render node of g claim minor: its sysfs dev file
// and its host node say 226:minor, as on a broken host where two render
// nodes carry one number.
func claimMinor(t *testing.T, tree *drmtest.Tree, g drmtest.GPU, node string, minor int) {
	t.Helper()
	parent, err := tree.DevicePath(g.ID())
	require.NoError(t, err)
	replaceFile(t, filepath.Join(parent, "drm", node, "dev"), fmt.Sprintf("226:%d\n", minor))
	mknod(t, filepath.Join(tree.Roots().Dev, "dri", node), 226, uint32(minor))
}

// Two cards that claim one major:minor are both refused, each with an
// error naming the other; the rest of the node is unaffected.
func TestDiscoverRefusesNumberConflicts(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	x := drmtest.IntelIGPU.WithPCI("0000:01:00.0").WithNodes(0, 128)
	y := drmtest.IntelIGPU.WithPCI("0000:02:00.0").WithNodes(1, 129)
	z := drmtest.IntelIGPU.WithPCI("0000:03:00.0").WithNodes(2, 130)

	for name, tc := range map[string]struct {
		node  string // Y's entry that is changed
		minor int    // to this minor
		clash string // X's node with that number
	}{
		"render nodes share 226:128":          {node: "renderD129", minor: 128, clash: "/dev/dri/renderD128"},
		"Y's card node has X's card number":   {node: "card1", minor: 0, clash: "/dev/dri/card0"},
		"Y's render node has X's card number": {node: "renderD129", minor: 0, clash: "/dev/dri/card0"},
	} {
		t.Run(name, func(t *testing.T) {
			tree := drmtest.MustBuild(t, x, y, z)
			claimMinor(t, tree, y, tc.node, tc.minor)
			inv := discover(t, tree)

			var ids []string
			for _, c := range inv.Cards {
				ids = append(ids, c.ID)
			}
			require.Equal(t, []string{z.ID()}, ids, "neither conflicting card may be advertised")

			var conflicts []string
			for _, e := range inv.Skipped {
				if errors.Is(e, drm.ErrNumberConflict) {
					conflicts = append(conflicts, e.Error())
				}
			}
			mm := fmt.Sprintf("226:%d", tc.minor)
			joined := strings.Join(conflicts, "\n")
			require.Contains(t, joined, "card "+x.ID()+": "+tc.clash+" is "+mm+", as is /dev/dri/"+tc.node+" (card1 of card "+y.ID()+")")
			require.Contains(t, joined, "card "+y.ID()+": /dev/dri/"+tc.node+" is "+mm+", as is "+tc.clash+" (card0 of card "+x.ID()+")")
			for _, e := range inv.Skipped {
				require.NotContains(t, e.Error(), z.ID(), "Z has no conflict")
			}
		})
	}
}

// Cards of one driver share /dev/kfd on purpose: that is no conflict.
func TestDiscoverSharedExtraIsNoConflict(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	tree := drmtest.MustBuild(t, drmtest.AMDdGPU.WithPCI("0000:03:00.0").WithNodes(0, 128),
		drmtest.AMDdGPU.WithPCI("0000:04:00.0").WithNodes(1, 129))
	inv := discover(t, tree)
	require.Len(t, inv.Cards, 2)
	require.Empty(t, inv.Skipped)
}
