package drm_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// piCodec is the codec block of the Pi-like SoC: V4L2 M2M nodes below
// the SoC bus node, next to the v3d and vc4 devices.
const piCodec = "platform/soc/soc:bcm2835-codec"

// piNode is a Pi-like SoC (v3d, display-only vc4, three V4L2 codec nodes
// and a media controller on the SoC), with a DMA heap, a SCSI generic
// node, two misc devices, and an Intel GPU on PCI next to it.
func piNode(t testing.TB) *drmtest.Tree {
	t.Helper()
	drmtest.SkipUnlessRoot(t)
	tree := drmtest.MustBuild(t, drmtest.PiV3D, drmtest.PiVC4, drmtest.IntelIGPU.WithNodes(2, 129))
	for _, d := range []drmtest.CharDevice{
		{Class: "video4linux", Name: "video10", Parent: piCodec, Major: 81, Minor: 10, GID: drmtest.VideoGID},
		{Class: "video4linux", Name: "video11", Parent: piCodec, Major: 81, Minor: 11, GID: drmtest.VideoGID},
		{Class: "video4linux", Name: "video12", Parent: piCodec, Major: 81, Minor: 12, GID: drmtest.VideoGID},
		{Class: "media", Name: "media0", Parent: piCodec, Major: 239, Minor: 0, GID: drmtest.VideoGID},
		{Class: "dma_heap", Name: "system", DevName: "dma_heap/system", Major: 240, Minor: 0},
		{Class: "scsi_generic", Name: "sg0", Parent: "pci0000:00/0000:00:17.0", Major: 21, Minor: 0},
		{Class: "misc", Name: "rga", Parent: "platform/soc/fdb80000.rga", Major: 10, Minor: 123},
		{Class: "misc", Name: "fuse", Major: 10, Minor: 229},
	} {
		require.NoError(t, tree.AddCharDevice(d))
	}
	return tree
}

func cardOf(t testing.TB, tree *drmtest.Tree, id string) *drm.Card {
	t.Helper()
	inv := discover(t, tree)
	for i := range inv.Cards {
		if inv.Cards[i].ID == id {
			return &inv.Cards[i]
		}
	}
	t.Fatalf("no card %s", id)
	return nil
}

func TestCompanions(t *testing.T) {
	tree := piNode(t)
	roots := tree.Roots()
	v3d := drmtest.PiV3D.ID()
	tests := map[string]struct {
		card  string
		comps []drm.Companion
		want  []string // container path=major:minor
		errs  []string // substrings, one per error, in order
		is    error
	}{
		"codec nodes tied to the SoC": {
			card: v3d, comps: []drm.Companion{{Subsystem: "video4linux"}},
			want: []string{"/dev/video10=81:10", "/dev/video11=81:11", "/dev/video12=81:12"},
		},
		"media controller of the SoC and the DMA heaps by glob": {
			card: v3d, comps: []drm.Companion{{Subsystem: "media"}, {Path: "/dev/dma_heap/*"}},
			want: []string{"/dev/dma_heap/system=240:0", "/dev/media0=239:0"},
		},
		"a named vendor media block": {
			card: v3d, comps: []drm.Companion{{Path: "/dev/rga"}},
			want: []string{"/dev/rga=10:123"},
		},
		"each node once": {
			card: v3d, comps: []drm.Companion{{Subsystem: "video4linux"}, {Path: "/dev/video1[01]"}},
			want: []string{"/dev/video10=81:10", "/dev/video11=81:11", "/dev/video12=81:12"},
		},
		"the SoC's codec is not tied to a PCI card": {
			card: drmtest.IntelIGPU.ID(), comps: []drm.Companion{{Subsystem: "video4linux"}},
			errs: []string{"companion subsystem video4linux of card 0000:00:02.0: companion missing: no video4linux node in " + filepath.Join(roots.Sysfs, "class", "video4linux") + " is tied to the card's device"},
			is:   drm.ErrCompanionMissing,
		},
		"a SCSI generic node is refused": {
			card: v3d, comps: []drm.Companion{{Path: "/dev/sg0"}},
			errs: []string{`companion /dev/sg0 of card fec00000.v3d: companion refused: /dev/sg0 (21:0) is of subsystem "scsi_generic", not one of video4linux, media, dma_heap, kfd`},
			is:   drm.ErrCompanionRefused,
		},
		"a misc device that is no media block is refused": {
			card: v3d, comps: []drm.Companion{{Path: "/dev/fuse"}},
			errs: []string{`/dev/fuse (10:229) is misc device "fuse", not one of the media blocks rga, mpp_service, mali0`},
			is:   drm.ErrCompanionRefused,
		},
		"a glob keeps what is allowed and refuses the rest": {
			card: v3d, comps: []drm.Companion{{Path: "/dev/[rs]*"}},
			want: []string{"/dev/rga=10:123"},
			errs: []string{`/dev/sg0 (21:0) is of subsystem "scsi_generic"`},
			is:   drm.ErrCompanionRefused,
		},
		"a missing node is reported": {
			card: v3d, comps: []drm.Companion{{Path: "/dev/video19"}, {Path: "/dev/rga"}},
			want: []string{"/dev/rga=10:123"},
			errs: []string{"companion /dev/video19 of card fec00000.v3d: companion missing: no node matches " + filepath.Join(roots.Dev, "video19")},
			is:   drm.ErrCompanionMissing,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			card := cardOf(t, tree, tc.card)
			nodes, errs := drm.Companions(roots, card, tc.comps)
			got := []string{}
			for _, n := range nodes {
				got = append(got, fmt.Sprintf("%s=%d:%d", n.Path, n.Major, n.Minor))
				require.Equal(t, filepath.Join(roots.Dev, strings.TrimPrefix(n.Path, "/dev/")), n.HostPath)
			}
			want := tc.want
			if want == nil {
				want = []string{}
			}
			require.Equal(t, want, got)
			require.Len(t, errs, len(tc.errs), "%v", errs)
			for i, e := range errs {
				require.Contains(t, e.Error(), tc.errs[i])
				require.ErrorIs(t, e, tc.is)
			}
		})
	}
}

// Another card's node under another name is refused by the kernel's
// record of its number, and so is a number the kernel has no device for.
func TestCompanionsRefuseCardNodesAndUnknownNumbers(t *testing.T) {
	tree := piNode(t)
	roots := tree.Roots()
	card := cardOf(t, tree, drmtest.PiV3D.ID())
	// The Intel card's render node (226:129), mknod'ed under another name.
	require.NoError(t, unix.Mknod(filepath.Join(roots.Dev, "video13"), unix.S_IFCHR|0o660, int(unix.Mkdev(226, 129))))
	require.NoError(t, unix.Mknod(filepath.Join(roots.Dev, "video14"), unix.S_IFCHR|0o660, int(unix.Mkdev(81, 14))))
	require.NoError(t, os.Symlink("dri/renderD128", filepath.Join(roots.Dev, "video15")))
	nodes, errs := drm.Companions(roots, card, []drm.Companion{{Path: "/dev/video1[345]"}})
	require.Empty(t, nodes)
	msg := errors.Join(errs...).Error()
	require.Contains(t, msg, "/dev/video13 (226:129) is a drm node: another card's node is never a companion")
	require.Contains(t, msg, "/dev/video14 (81:14): the kernel has no device registered for it")
	require.Contains(t, msg, filepath.Join(roots.Dev, "video15")+" is not a char device")
	for _, e := range errs {
		require.ErrorIs(t, e, drm.ErrCompanionRefused)
	}
}

// FuzzCompanions writes a fuzzed dev attribute and uevent DEVNAME into
// the Pi-like codec's class device and checks that resolving its
// companions never fails the call, never hands out a node outside the
// dev root, with other numbers than its host node, or of another
// subsystem (the dev tree holds DRM nodes), and never loses the other
// codec nodes.
func FuzzCompanions(f *testing.F) {
	f.Add("81:10\n", "video10")
	f.Add("81:10", "../video10")
	f.Add("226:0\n", "dri/card0")
	f.Add("garbage", "/etc/passwd")
	f.Add("81:11\n", "video11")
	tree := piNode(f)
	roots := tree.Roots()
	card := cardOf(f, tree, drmtest.PiV3D.ID())
	dir := filepath.Join(roots.Sysfs, "devices", piCodec, "video4linux", "video10")
	f.Fuzz(func(t *testing.T, dev, devname string) {
		if strings.ContainsAny(devname, "\n\x00") || len(devname) > 128 {
			return
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "dev"), []byte(dev), 0o444))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "uevent"), []byte("MAJOR=81\nMINOR=10\nDEVNAME="+devname+"\n"), 0o444))
		nodes, _ := drm.Companions(roots, card, []drm.Companion{{Subsystem: "video4linux"}})
		paths := map[string]bool{}
		for _, n := range nodes {
			paths[n.Path] = true
			require.True(t, strings.HasPrefix(n.HostPath, roots.Dev+"/"), n.HostPath)
			require.Equal(t, "/dev/"+strings.TrimPrefix(n.HostPath, roots.Dev+"/"), n.Path)
			require.NotEqual(t, uint32(226), n.Major, "a DRM node is never a companion")
			var st unix.Stat_t
			require.NoError(t, unix.Lstat(n.HostPath, &st))
			require.Equal(t, uint64(unix.Mkdev(n.Major, n.Minor)), uint64(st.Rdev), "%s has the numbers of its host node", n.Path)
			require.Contains(t, []uint32{81}, n.Major, "only V4L2 nodes: %s", n.Path)
		}
		require.True(t, paths["/dev/video11"] && paths["/dev/video12"], "%v", paths)
	})
}
