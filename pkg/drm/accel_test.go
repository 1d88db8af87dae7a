package drm_test

import (
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

func TestDiscoverAccel(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	const (
		npu     = "0000:00:0b.0 accel0 driver=intel_vpu bus=pci pci=8086:7d1d@0000:00:0b.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:0b.0 accel=/dev/accel/accel0=dev/accel/accel0@261:0"
		igpu    = "0000:00:02.0 card0 driver=i915 bus=pci pci=8086:7d55@0000:00:02.0 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:02.0 card=/dev/dri/card0=dev/dri/card0@226:0 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/pci-0000:00:02.0-card=dev/dri/by-path/pci-0000:00:02.0-card@226:0 bypath=/dev/dri/by-path/pci-0000:00:02.0-render=dev/dri/by-path/pci-0000:00:02.0-render@226:128"
		xdna    = "0000:c6:00.1 accel1 driver=amdxdna bus=pci pci=1022:1502@0000:c6:00.1 numa=-1 sysfs=sys/devices/pci0000:00/0000:00:01.0/0000:c6:00.1 accel=/dev/accel/accel1=dev/accel/accel1@261:1"
		panthor = "fb000000.gpu card0 driver=panthor bus=platform pci=:@ numa=-1 sysfs=sys/devices/platform/fb000000.gpu card=/dev/dri/card0=dev/dri/card0@226:0 render=/dev/dri/renderD128=dev/dri/renderD128@226:128 bypath=/dev/dri/by-path/platform-fb000000.gpu-card=dev/dri/by-path/platform-fb000000.gpu-card@226:0 bypath=/dev/dri/by-path/platform-fb000000.gpu-render=dev/dri/by-path/platform-fb000000.gpu-render@226:128"
		rocket  = "fdab0000.npu accel0 driver=rocket bus=platform pci=:@ numa=-1 sysfs=sys/devices/platform/fdab0000.npu accel=/dev/accel/accel0=dev/accel/accel0@261:0"
		gaudi   = "0000:4d:00.0 accel0 driver=habanalabs bus=pci pci=1da3:1020@0000:4d:00.0 numa=0 sysfs=sys/devices/pci0000:00/0000:00:01.0/0000:4d:00.0 accel=/dev/accel/accel0=dev/accel/accel0@261:0"
	)
	tests := map[string]struct {
		gpus    []drmtest.GPU
		want    []string
		skipped []string // what Inventory.Skipped says, in order
	}{
		"intel_vpu":                              {gpus: []drmtest.GPU{drmtest.IntelNPU}, want: []string{npu}},
		"amdxdna, second accel minor":            {gpus: []drmtest.GPU{drmtest.AMDXDNA.WithNodes(1, -1)}, want: []string{xdna}},
		"Meteor Lake: i915 card0 and NPU accel0": {gpus: []drmtest.GPU{drmtest.IntelIGPU, drmtest.IntelNPU}, want: []string{igpu, npu}},
		"RK3588: panthor next to rocket":         {gpus: []drmtest.GPU{drmtest.RK3588Panthor, drmtest.RK3588Rocket}, want: []string{panthor, rocket}},
		"habanalabs: accel0 served, control node refused": {
			gpus:    []drmtest.GPU{drmtest.HabanaGaudi2},
			want:    []string{gaudi},
			skipped: []string{"class/accel/accel_controlD0: accel control node, not served: accel_controlD0 manages its device for every user; only accel<N> nodes are advertised"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tree := drmtest.MustBuild(t, tc.gpus...)
			inv := discover(t, tree)
			var skipped []string
			for _, e := range inv.Skipped {
				skipped = append(skipped, strings.TrimPrefix(e.Error(), "skip DRM entry "+tree.Roots().Sysfs+"/"))
				if strings.Contains(e.Error(), "accel_controlD") {
					require.ErrorIs(t, e, drm.ErrControlNode)
				}
			}
			require.Equal(t, tc.skipped, skipped)
			got := []string{}
			for _, c := range inv.Cards {
				got = append(got, summary(t, tree.Root(), c))
				want := drm.ClassDRM
				if !c.HasCardNode() {
					want = drm.ClassAccel
				}
				require.Equal(t, want, c.Class(), c.ID)
				require.False(t, c.DisplayOnly(), c.ID)
			}
			require.Equal(t, tc.want, got, "\n%s", strings.Join(got, "\n"))
		})
	}
}

// TestDiscoverCardAndAccelOnOneDevice: a parent device with both a DRM
// card and an accel node is one device, named after its card, holding
// every node, never two devices with one ID.
func TestDiscoverCardAndAccelOnOneDevice(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	tree := drmtest.MustBuild(t, drmtest.IntelIGPU)
	addAccel(t, tree, drmtest.IntelIGPU.ID(), "accel0", "261:0", 261, 0)
	inv := discover(t, tree)
	require.Empty(t, inv.Skipped)
	require.Len(t, inv.Cards, 1)
	c := inv.Cards[0]
	require.Equal(t, "card0", c.Name)
	require.Equal(t, drm.ClassDRM, c.Class())
	require.NotNil(t, c.AccelNode)
	var paths []string
	for _, n := range c.DRMNodes() {
		paths = append(paths, n.Path)
	}
	require.Equal(t, []string{"/dev/dri/card0", "/dev/dri/renderD128", "/dev/accel/accel0"}, paths)
}

// addAccel adds class/accel/<name> with dev under the parent device of
// the fake GPU id, its <sysfs>/dev/char link, and a char node
// <dev>/accel/<name> with the numbers major:minor (which may differ from
// dev, for mismatch cases; major 0 leaves the node out).
func addAccel(t *testing.T, tree *drmtest.Tree, id, name, dev string, major, minor uint32) {
	t.Helper()
	parent, err := tree.DevicePath(id)
	require.NoError(t, err)
	roots := tree.Roots()
	dir := filepath.Join(parent, "accel", name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dev"), []byte(dev+"\n"), 0o444))
	require.NoError(t, os.Symlink("../../../"+filepath.Base(parent), filepath.Join(dir, "device")))
	class := filepath.Join(roots.Sysfs, "class", "accel")
	require.NoError(t, os.MkdirAll(class, 0o755))
	rel, err := filepath.Rel(class, dir)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(rel, filepath.Join(class, name)))
	if major == 0 {
		return
	}
	node := filepath.Join(roots.Dev, "accel", name)
	require.NoError(t, os.MkdirAll(filepath.Dir(node), 0o755))
	require.NoError(t, unix.Mknod(node, unix.S_IFCHR|0o660, int(unix.Mkdev(major, minor))))
}

func TestDiscoverAccelMalformed(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	npu := drmtest.IntelNPU.ID()
	tests := map[string]struct {
		gpus    []drmtest.GPU
		mutate  func(t *testing.T, tree *drmtest.Tree, parent string)
		wantIDs []string
		skipped map[string]error // by class/accel or class/drm entry, "" for any
		says    []string         // substrings of the skip errors
	}{
		"garbage dev": {
			mutate: func(t *testing.T, _ *drmtest.Tree, parent string) {
				replaceFile(t, filepath.Join(parent, "accel", "accel0", "dev"), "261\n")
			},
			skipped: map[string]error{"accel/accel0": drm.ErrBadDev},
			says:    []string{"accel0/dev"},
		},
		"node missing under /dev/accel": {
			mutate: func(t *testing.T, tree *drmtest.Tree, _ string) {
				require.NoError(t, os.Remove(filepath.Join(tree.Roots().Dev, "accel", "accel0")))
			},
			skipped: map[string]error{"accel/accel0": os.ErrNotExist},
			says:    []string{"dev/accel/accel0"},
		},
		"node has other numbers than sysfs": {
			mutate: func(t *testing.T, tree *drmtest.Tree, _ string) {
				node := filepath.Join(tree.Roots().Dev, "accel", "accel0")
				require.NoError(t, os.Remove(node))
				require.NoError(t, unix.Mknod(node, unix.S_IFCHR|0o660, int(unix.Mkdev(261, 5))))
			},
			skipped: map[string]error{"accel/accel0": drm.ErrNodeMismatch},
			says:    []string{"is 261:5, sysfs says 261:0"},
		},
		"node in /dev/dri instead of /dev/accel": {
			mutate: func(t *testing.T, tree *drmtest.Tree, _ string) {
				dev := tree.Roots().Dev
				require.NoError(t, os.Rename(filepath.Join(dev, "accel", "accel0"), filepath.Join(dev, "dri", "accel0")))
			},
			skipped: map[string]error{"accel/accel0": os.ErrNotExist},
		},
		"two accel nodes on one device": {
			mutate: func(t *testing.T, tree *drmtest.Tree, _ string) {
				addAccel(t, tree, npu, "accel1", "261:1", 261, 1)
			},
			skipped: map[string]error{"accel/accel0": drm.ErrUnpaired, "accel/accel1": drm.ErrUnpaired},
			says:    []string{"has 0 card, 0 render and 2 accel nodes"},
		},
		"render node without a card next to an accel node": {
			mutate: func(t *testing.T, _ *drmtest.Tree, parent string) {
				tree := filepath.Dir(filepath.Dir(filepath.Dir(parent))) // <root>/sys
				dir := filepath.Join(parent, "drm", "renderD200")
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "dev"), []byte("226:200\n"), 0o444))
				require.NoError(t, os.Symlink("../../../"+filepath.Base(parent), filepath.Join(dir, "device")))
				rel, err := filepath.Rel(filepath.Join(tree, "class", "drm"), dir)
				require.NoError(t, err)
				require.NoError(t, os.Symlink(rel, filepath.Join(tree, "class", "drm", "renderD200")))
			},
			skipped: map[string]error{"accel/accel0": drm.ErrUnpaired, "drm/renderD200": drm.ErrUnpaired},
			says:    []string{"has 0 card, 1 render and 1 accel nodes"},
		},
		"class link dangles": {
			mutate: func(t *testing.T, tree *drmtest.Tree, _ string) {
				replaceLink(t, filepath.Join(tree.Roots().Sysfs, "class", "accel", "accel0"), "../../devices/pci0000:00/0000:00:0b.0/accel/accel7")
			},
			skipped: map[string]error{"accel/accel0": os.ErrNotExist},
		},
		"class link leads out of the sysfs root": {
			mutate: func(t *testing.T, tree *drmtest.Tree, _ string) {
				replaceLink(t, filepath.Join(tree.Roots().Sysfs, "class", "accel", "accel0"), "/")
			},
			skipped: map[string]error{"accel/accel0": drm.ErrOutsideRoot},
		},
		"device link dangles": {
			mutate: func(t *testing.T, _ *drmtest.Tree, parent string) {
				replaceLink(t, filepath.Join(parent, "accel", "accel0", "device"), "../../../0000:00:0f.0")
			},
			skipped: map[string]error{"accel/accel0": os.ErrNotExist},
		},
		"entries that are not nodes are ignored": {
			mutate: func(t *testing.T, tree *drmtest.Tree, _ string) {
				class := filepath.Join(tree.Roots().Sysfs, "class", "accel")
				for _, name := range []string{"accel", "accel01", "accel-1", "accel_controlD", "accel_controlDx", "version"} {
					require.NoError(t, os.WriteFile(filepath.Join(class, name), nil, 0o444))
				}
			},
			wantIDs: []string{drmtest.IntelIGPU.ID(), npu},
		},
		"two accel devices claim one number": {
			// rocket's sysfs and node both say 261:0, the NPU's number:
			// neither can be told to own it.
			gpus: []drmtest.GPU{drmtest.IntelNPU, drmtest.IntelIGPU, drmtest.RK3588Rocket.WithNodes(1, -1)},
			mutate: func(t *testing.T, tree *drmtest.Tree, _ string) {
				rocket, err := tree.DevicePath(drmtest.RK3588Rocket.ID())
				require.NoError(t, err)
				replaceFile(t, filepath.Join(rocket, "accel", "accel1", "dev"), "261:0\n")
				node := filepath.Join(tree.Roots().Dev, "accel", "accel1")
				require.NoError(t, os.Remove(node))
				require.NoError(t, unix.Mknod(node, unix.S_IFCHR|0o660, int(unix.Mkdev(261, 0))))
			},
			skipped: map[string]error{"accel/accel0": drm.ErrNumberConflict, "accel/accel1": drm.ErrNumberConflict},
			says:    []string{"/dev/accel/accel0 is 261:0, as is /dev/accel/accel1 (accel1 of card fdab0000.npu)"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gpus := tc.gpus
			if gpus == nil {
				gpus = []drmtest.GPU{drmtest.IntelNPU, drmtest.IntelIGPU}
			}
			tree := drmtest.MustBuild(t, gpus...)
			parent, err := tree.DevicePath(npu)
			require.NoError(t, err)
			if tc.mutate != nil {
				tc.mutate(t, tree, parent)
			}
			inv := discover(t, tree)
			ids := []string{}
			for _, c := range inv.Cards {
				ids = append(ids, c.ID)
			}
			want := tc.wantIDs
			if want == nil {
				want = []string{drmtest.IntelIGPU.ID()}
			}
			require.Equal(t, want, ids)
			var msgs []string
			for _, e := range inv.Skipped {
				msgs = append(msgs, e.Error())
			}
			all := strings.Join(msgs, "\n")
			require.Len(t, inv.Skipped, len(tc.skipped), all)
			for entry, is := range tc.skipped {
				prefix := fmt.Sprintf("skip DRM entry %s: ", filepath.Join(tree.Roots().Sysfs, "class", entry))
				found := false
				for _, e := range inv.Skipped {
					if strings.HasPrefix(e.Error(), prefix) {
						found = true
						require.ErrorIs(t, e, is, e.Error())
					}
				}
				require.True(t, found, "no error for %s in:\n%s", entry, all)
			}
			for _, s := range tc.says {
				require.Contains(t, all, s)
			}
		})
	}
}

// FuzzDiscoverAccel writes a fuzzed dev attribute, driver link and class
// entry name into the NPU of a real-looking tree and checks that
// discovery never fails, never reports an accel device with numbers
// other than its dev attribute, and never disturbs the GPU next to it.
func FuzzDiscoverAccel(f *testing.F) {
	f.Add("261:0\n", "../../../bus/pci/drivers/intel_vpu", "accel0")
	f.Add("261:0", "intel_vpu", "accel7")
	f.Add("226:0\n", "", "accel_controlD0")
	f.Add("261:", "/", "accel")
	f.Add("261:0\n", ".", "accel00")
	drmtest.SkipUnlessRoot(f)
	tree := drmtest.MustBuild(f, drmtest.IntelNPU, drmtest.IntelIGPU)
	roots := tree.Roots()
	parent, err := tree.DevicePath(drmtest.IntelNPU.ID())
	require.NoError(f, err)
	class := filepath.Join(roots.Sysfs, "class", "accel")
	f.Fuzz(func(t *testing.T, dev, driver, name string) {
		if strings.ContainsAny(driver, "\x00") || len(driver) > 256 || name == "" || len(name) > 64 ||
			strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
			return
		}
		write := func(path, content string) {
			require.NoError(t, os.RemoveAll(path))
			require.NoError(t, os.WriteFile(path, []byte(content), 0o444))
		}
		write(filepath.Join(parent, "accel", "accel0", "dev"), dev)
		require.NoError(t, os.RemoveAll(filepath.Join(parent, "driver")))
		if driver != "" {
			require.NoError(t, os.Symlink(driver, filepath.Join(parent, "driver")))
		}
		entries, err := os.ReadDir(class)
		require.NoError(t, err)
		for _, e := range entries {
			require.NoError(t, os.Remove(filepath.Join(class, e.Name())))
		}
		require.NoError(t, os.Symlink("../../devices/pci0000:00/0000:00:0b.0/accel/accel0", filepath.Join(class, name)))

		inv, err := drm.Discover(roots)
		require.NoError(t, err)
		var gpu, acc *drm.Card
		for i, c := range inv.Cards {
			switch c.ID {
			case drmtest.IntelIGPU.ID():
				gpu = &inv.Cards[i]
			case drmtest.IntelNPU.ID():
				acc = &inv.Cards[i]
			}
		}
		require.NotNil(t, gpu)
		require.Nil(t, gpu.AccelNode)
		if acc == nil {
			return
		}
		require.Empty(t, inv.Skipped)
		require.NotNil(t, acc.AccelNode)
		require.Equal(t, drm.ClassAccel, acc.Class())
		require.Equal(t, "/dev/accel/"+name, acc.AccelNode.Path)
		major, minor, err := drm.ParseDev(dev)
		require.NoError(t, err)
		require.Equal(t, [2]uint32{acc.AccelNode.Major, acc.AccelNode.Minor}, [2]uint32{major, minor})
		require.NotEmpty(t, acc.Driver)
		require.NotContains(t, acc.Driver, "/")
	})
}
