package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// A broken tree where two cards' render nodes both carry 226:128:
// discover and cdi generate warn naming both cards and show neither.
func TestConflictingNumbersAreShownAndRefused(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	x := drmtest.IntelIGPU.WithPCI("0000:01:00.0").WithNodes(0, 128)
	y := drmtest.IntelIGPU.WithPCI("0000:02:00.0").WithNodes(1, 129)
	tree := drmtest.MustBuild(t, x, y)
	parent, err := tree.DevicePath(y.ID())
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(parent, "drm", "renderD129", "dev")))
	require.NoError(t, os.WriteFile(filepath.Join(parent, "drm", "renderD129", "dev"), []byte("226:128\n"), 0o444))
	node := filepath.Join(tree.Roots().Dev, "dri", "renderD129")
	require.NoError(t, os.Remove(node))
	require.NoError(t, unix.Mknod(node, unix.S_IFCHR|0o660, int(unix.Mkdev(226, 128))))

	for _, args := range [][]string{{"discover", "-o", "json"}, {"cdi", "generate"}} {
		r := run(t, nil, append(args, rootFlagsOf(tree)...)...)
		require.Equal(t, ExitOK, r.code, r.stderr)
		for _, id := range []string{x.ID(), y.ID()} {
			require.Contains(t, r.stderr, "device number claimed by two cards: card "+id, args)
			require.NotContains(t, r.stdout, id, "%v must not show a conflicting card", args)
		}
		require.Contains(t, r.stderr, "/dev/dri/renderD129 is 226:128, as is /dev/dri/renderD128 (card0 of card "+x.ID()+")")
	}
}
