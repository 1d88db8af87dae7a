package drm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// paths of the GPU a malformed case breaks (drmtest.IntelIGPU: card0,
// renderD128 on 0000:00:02.0).
type paths struct {
	sys    string // sysfs root
	class  string // sys/class/drm
	parent string // sys/devices/pci0000:00/0000:00:02.0
	dri    string // dev/dri
	tree   *drmtest.Tree
}

func (p paths) card() string   { return filepath.Join(p.parent, "drm", "card0") }
func (p paths) render() string { return filepath.Join(p.parent, "drm", "renderD128") }

// reason is what Skipped must say about one class/drm entry.
type reason struct {
	is       error  // sentinel the error wraps; nil when none applies
	contains string // text the error must hold besides the entry path
	under    string // path below the tree root the error must name, if any
}

func mknod(t *testing.T, path string, major, minor uint32) {
	t.Helper()
	require.NoError(t, os.RemoveAll(path))
	require.NoError(t, unix.Mknod(path, unix.S_IFCHR|0o660, int(unix.Mkdev(major, minor))))
}

func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.RemoveAll(path))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o444))
}

func replaceLink(t *testing.T, path, target string) {
	t.Helper()
	require.NoError(t, os.RemoveAll(path))
	require.NoError(t, os.Symlink(target, path))
}

// readFailsWithEIO makes every read of file fail with EIO, as an
// attribute of a failing device can: it bind-mounts the test process's
// /proc/<pid>/mem over it, a regular file whose read at offset 0 (an
// address never mapped) the kernel fails with EIO. The mount is made in a
// mount namespace of the test's own thread, so nothing outside the test
// sees it, and is undone before the tree is removed. The thread stays
// locked, so it ends with the test, and the namespace with it.
func readFailsWithEIO(t *testing.T, file string) {
	t.Helper()
	runtime.LockOSThread()
	require.NoError(t, unix.Unshare(unix.CLONE_NEWNS))
	require.NoError(t, unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""))
	require.NoError(t, unix.Mount(fmt.Sprintf("/proc/%d/mem", os.Getpid()), file, "", unix.MS_BIND, ""))
	t.Cleanup(func() { require.NoError(t, unix.Unmount(file, unix.MNT_DETACH)) })
	_, err := os.ReadFile(file)
	require.ErrorIs(t, err, unix.EIO, "a read of the mounted mem file must fail with EIO")
}

// outsideCard makes <root>/sys-outside/<name> holding a copy of the
// card's dev file and returns it.
func outsideCard(t *testing.T, tree *drmtest.Tree, card, name string) string {
	t.Helper()
	dir := filepath.Join(tree.Root(), "sys-outside", name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	dev, err := os.ReadFile(filepath.Join(card, "dev"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dev"), dev, 0o444))
	return dir
}

// outsideDevice makes <root>/sys-outside/<id>, a PCI device with every
// attribute a card's parent has, and returns it.
func outsideDevice(t *testing.T, tree *drmtest.Tree, parent, id string) string {
	t.Helper()
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

// relLink replaces link with a relative symlink to target.
func relLink(t *testing.T, link, target string) {
	t.Helper()
	rel, err := filepath.Rel(filepath.Dir(link), target)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(rel, "../"), rel)
	replaceLink(t, link, rel)
}

func TestDiscoverMalformed(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	const intel, amd = "0000:00:02.0", "0000:03:00.0"
	good := drmtest.AMDdGPU.WithNodes(1, 129)
	sibling := reason{is: drm.ErrSibling, contains: "card0 of device"}
	renderSibling := reason{is: drm.ErrSibling, contains: "renderD128 of device"}
	unpaired := reason{is: drm.ErrUnpaired, contains: "has 0 card, 1 render and 0 accel nodes"}
	// outside is a card refused for leading out of the root into
	// <root>/sys-outside.
	outside := reason{is: drm.ErrOutsideRoot, under: "sys-outside"}
	third := drmtest.IntelXe.WithNodes(2, 130).WithPCI("0000:04:00.0")

	tests := map[string]struct {
		gpus    []drmtest.GPU // default: IntelIGPU (broken by mutate) and good
		mutate  func(t *testing.T, p paths)
		wantIDs []string
		skipped map[string]reason // by class/drm entry name
	}{
		"garbage dev in card": {
			mutate:  func(t *testing.T, p paths) { replaceFile(t, filepath.Join(p.card(), "dev"), "garbage\n") },
			skipped: map[string]reason{"card0": {is: drm.ErrBadDev, contains: `"garbage\n"`}, "renderD128": sibling},
		},
		"garbage dev in render node takes the card with it": {
			mutate:  func(t *testing.T, p paths) { replaceFile(t, filepath.Join(p.render(), "dev"), "226\n") },
			skipped: map[string]reason{"renderD128": {is: drm.ErrBadDev, contains: "renderD128/dev"}, "card0": renderSibling},
		},
		"dev is a directory": {
			mutate: func(t *testing.T, p paths) {
				require.NoError(t, os.Remove(filepath.Join(p.card(), "dev")))
				require.NoError(t, os.Mkdir(filepath.Join(p.card(), "dev"), 0o755))
			},
			skipped: map[string]reason{"card0": {is: nil, contains: "card0/dev: not a regular file"}, "renderD128": sibling},
		},
		"dev is a FIFO": {
			mutate: func(t *testing.T, p paths) {
				require.NoError(t, os.Remove(filepath.Join(p.card(), "dev")))
				require.NoError(t, unix.Mkfifo(filepath.Join(p.card(), "dev"), 0o644))
			},
			skipped: map[string]reason{"card0": {is: nil, contains: "card0/dev: not a regular file"}, "renderD128": sibling},
		},
		"dev missing": {
			mutate:  func(t *testing.T, p paths) { require.NoError(t, os.Remove(filepath.Join(p.card(), "dev"))) },
			skipped: map[string]reason{"card0": {is: os.ErrNotExist, contains: "card0/dev"}, "renderD128": sibling},
		},
		"vendor unreadable": {
			mutate: func(t *testing.T, p paths) {
				require.NoError(t, os.Remove(filepath.Join(p.parent, "vendor")))
				require.NoError(t, os.Mkdir(filepath.Join(p.parent, "vendor"), 0o755))
			},
			skipped: map[string]reason{"card0": {is: nil, contains: "0000:00:02.0/vendor: not a regular file"}, "renderD128": sibling},
		},
		"vendor read fails with EIO": {
			mutate:  func(t *testing.T, p paths) { readFailsWithEIO(t, filepath.Join(p.parent, "vendor")) },
			skipped: map[string]reason{"card0": {is: unix.EIO, contains: "0000:00:02.0/vendor: input/output error"}, "renderD128": sibling},
		},
		"garbage vendor": {
			mutate:  func(t *testing.T, p paths) { replaceFile(t, filepath.Join(p.parent, "vendor"), "0xzz\n") },
			skipped: map[string]reason{"card0": {is: drm.ErrBadHexID, contains: "vendor"}, "renderD128": sibling},
		},
		"garbage device id": {
			mutate:  func(t *testing.T, p paths) { replaceFile(t, filepath.Join(p.parent, "device"), "7d55\n") },
			skipped: map[string]reason{"card0": {is: drm.ErrBadHexID, contains: "device"}, "renderD128": sibling},
		},
		"garbage numa_node": {
			mutate:  func(t *testing.T, p paths) { replaceFile(t, filepath.Join(p.parent, "numa_node"), "-2\n") },
			skipped: map[string]reason{"card0": {is: drm.ErrBadNUMA, contains: "numa_node"}, "renderD128": sibling},
		},
		"device link missing": {
			mutate:  func(t *testing.T, p paths) { require.NoError(t, os.Remove(filepath.Join(p.card(), "device"))) },
			skipped: map[string]reason{"card0": {is: os.ErrNotExist, contains: "card0/device"}, "renderD128": sibling},
		},
		"device link loops": {
			mutate:  func(t *testing.T, p paths) { replaceLink(t, filepath.Join(p.card(), "device"), "device") },
			skipped: map[string]reason{"card0": {is: unix.ELOOP, contains: "card0/device"}, "renderD128": sibling},
		},
		"class link dangles": {
			mutate: func(t *testing.T, p paths) {
				replaceLink(t, filepath.Join(p.class, "card0"), "../../devices/pci0000:00/0000:00:02.0/drm/card9")
			},
			skipped: map[string]reason{"card0": {is: os.ErrNotExist, contains: "class/drm/card0"}, "renderD128": sibling},
		},
		"class link loops, its render node is not paired with anything": {
			mutate:  func(t *testing.T, p paths) { replaceLink(t, filepath.Join(p.class, "card0"), "card0") },
			skipped: map[string]reason{"card0": {is: unix.ELOOP, contains: "class/drm/card0"}, "renderD128": unpaired},
		},
		"class link leads out of the sysfs root": {
			mutate: func(t *testing.T, p paths) {
				outside := filepath.Join(t.TempDir(), "dev0", "drm", "card0")
				require.NoError(t, os.MkdirAll(outside, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(outside, "dev"), []byte("226:0\n"), 0o444))
				replaceLink(t, filepath.Join(p.class, "card0"), outside)
			},
			skipped: map[string]reason{"card0": {is: drm.ErrOutsideRoot, contains: "dev0/drm/card0"}, "renderD128": unpaired},
		},

		// The next cases lead class and device links out of the sysfs
		// root with relative targets, whose leading ".." the resolver
		// folds into the link's directory, and through prefixes an
		// earlier entry of the pass has already resolved. The target is
		// a complete device in "sys-outside", a sibling of the root
		// whose name the root's is a prefix of, so only the containment
		// check can refuse it.
		// A card directory straight below the sysfs root makes the root
		// its parent device; a virtio card's transport device is the
		// parent's parent, which would be outside the root.
		"virtio card whose parent is the sysfs root": {
			gpus: []drmtest.GPU{drmtest.VirtioGPU, good},
			mutate: func(t *testing.T, p paths) {
				vcard := filepath.Join(p.parent, "drm", "card0") // p.parent is virtio1
				card := filepath.Join(p.sys, "drm", "card0")
				require.NoError(t, os.MkdirAll(card, 0o755))
				for _, f := range []string{"dev", "uevent"} {
					b, err := os.ReadFile(filepath.Join(vcard, f))
					require.NoError(t, err)
					require.NoError(t, os.WriteFile(filepath.Join(card, f), b, 0o444))
				}
				replaceLink(t, filepath.Join(card, "device"), "../..")
				replaceLink(t, filepath.Join(p.class, "card0"), "../../drm/card0")
				replaceLink(t, filepath.Join(p.sys, "subsystem"), "bus/virtio")
				replaceLink(t, filepath.Join(p.sys, "driver"), "bus/virtio/drivers/virtio_gpu")
			},
			skipped: map[string]reason{"card0": {is: drm.ErrOutsideRoot, contains: "transport device"}, "renderD128": unpaired},
		},
		"relative class link out of the root, first entry of the pass": {
			mutate: func(t *testing.T, p paths) {
				out := outsideCard(t, p.tree, p.card(), "card0")
				relLink(t, filepath.Join(p.class, "card0"), out)
			},
			skipped: map[string]reason{"card0": outside, "renderD128": unpaired},
		},
		"relative class link out of the root through resolved prefixes and back up": {
			// card1 comes after card0 in class/drm: /devices and
			// pci0000:00 are cached when its target walks them and
			// climbs out with "..".
			mutate: func(t *testing.T, p paths) {
				parent, err := p.tree.DevicePath(amd)
				require.NoError(t, err)
				out := outsideCard(t, p.tree, filepath.Join(parent, "drm", "card1"), "card1")
				rel, err := filepath.Rel(p.sys, out)
				require.NoError(t, err)
				replaceLink(t, filepath.Join(p.class, "card1"), "../../devices/pci0000:00/../../"+rel)
			},
			wantIDs: []string{intel},
			skipped: map[string]reason{"card1": outside, "renderD129": unpaired},
		},
		"relative class link out of the root read through the class directory's descriptor": {
			// card2 is the third entry of class/drm, the use that
			// opens the directory: its link is read relative to it.
			gpus: []drmtest.GPU{drmtest.IntelIGPU, good, third},
			mutate: func(t *testing.T, p paths) {
				parent, err := p.tree.DevicePath(third.ID())
				require.NoError(t, err)
				out := outsideCard(t, p.tree, filepath.Join(parent, "drm", "card2"), "card2")
				relLink(t, filepath.Join(p.class, "card2"), out)
			},
			wantIDs: []string{intel, amd},
			skipped: map[string]reason{"card2": outside, "renderD130": unpaired},
		},
		"relative device link out of the root, of a card whose directory is resolved": {
			mutate: func(t *testing.T, p paths) {
				parent, err := p.tree.DevicePath(amd)
				require.NoError(t, err)
				out := outsideDevice(t, p.tree, parent, amd)
				relLink(t, filepath.Join(parent, "drm", "card1", "device"), out)
			},
			wantIDs: []string{intel},
			skipped: map[string]reason{"card1": outside, "renderD129": {is: drm.ErrSibling, contains: "card1 of device"}},
		},
		"driver link missing": {
			mutate:  func(t *testing.T, p paths) { require.NoError(t, os.Remove(filepath.Join(p.parent, "driver"))) },
			skipped: map[string]reason{"card0": {is: os.ErrNotExist, contains: "0000:00:02.0/driver"}, "renderD128": sibling},
		},
		"driver link loops": {
			mutate:  func(t *testing.T, p paths) { replaceLink(t, filepath.Join(p.parent, "driver"), "driver") },
			skipped: map[string]reason{"card0": {is: unix.ELOOP, contains: "0000:00:02.0/driver"}, "renderD128": sibling},
		},
		"driver link of the kernel's shape dangles: its name is still the driver": {
			mutate: func(t *testing.T, p paths) {
				replaceLink(t, filepath.Join(p.parent, "driver"), "../../../bus/pci/drivers/gone")
			},
			wantIDs: []string{intel, amd},
		},
		"driver link of another shape dangles": {
			mutate: func(t *testing.T, p paths) {
				replaceLink(t, filepath.Join(p.parent, "driver"), "../../../gone/i915")
			},
			skipped: map[string]reason{"card0": {is: os.ErrNotExist, contains: "0000:00:02.0/driver"}, "renderD128": sibling},
		},
		"subsystem link of another shape leads out of the root": {
			mutate: func(t *testing.T, p paths) {
				replaceLink(t, filepath.Join(p.parent, "subsystem"), "/")
			},
			skipped: map[string]reason{"card0": {is: drm.ErrBadLink, contains: "0000:00:02.0/subsystem"}, "renderD128": sibling},
		},
		"subsystem link missing": {
			mutate:  func(t *testing.T, p paths) { require.NoError(t, os.Remove(filepath.Join(p.parent, "subsystem"))) },
			skipped: map[string]reason{"card0": {is: os.ErrNotExist, contains: "0000:00:02.0/subsystem"}, "renderD128": sibling},
		},
		"card node missing": {
			mutate:  func(t *testing.T, p paths) { require.NoError(t, os.Remove(filepath.Join(p.dri, "card0"))) },
			skipped: map[string]reason{"card0": {is: os.ErrNotExist, contains: "dev/dri/card0"}, "renderD128": sibling},
		},
		"render node missing: the card is not reported display-only": {
			mutate:  func(t *testing.T, p paths) { require.NoError(t, os.Remove(filepath.Join(p.dri, "renderD128"))) },
			skipped: map[string]reason{"renderD128": {is: os.ErrNotExist, contains: "dev/dri/renderD128"}, "card0": renderSibling},
		},
		"card node is a regular file": {
			mutate:  func(t *testing.T, p paths) { replaceFile(t, filepath.Join(p.dri, "card0"), "") },
			skipped: map[string]reason{"card0": {is: drm.ErrNodeMismatch, contains: "not a char device"}, "renderD128": sibling},
		},
		"card node is a symlink to a char device": {
			mutate:  func(t *testing.T, p paths) { replaceLink(t, filepath.Join(p.dri, "card0"), "card1") },
			skipped: map[string]reason{"card0": {is: drm.ErrNodeMismatch, contains: "not a char device"}, "renderD128": sibling},
		},
		"card node has other numbers": {
			mutate:  func(t *testing.T, p paths) { mknod(t, filepath.Join(p.dri, "card0"), 226, 5) },
			skipped: map[string]reason{"card0": {is: drm.ErrNodeMismatch, contains: "is 226:5, sysfs says 226:0"}, "renderD128": sibling},
		},
		"render node has another major": {
			mutate:  func(t *testing.T, p paths) { mknod(t, filepath.Join(p.dri, "renderD128"), 227, 128) },
			skipped: map[string]reason{"renderD128": {is: drm.ErrNodeMismatch, contains: "is 227:128"}, "card0": renderSibling},
		},
		"two render nodes on one device": {
			mutate: func(t *testing.T, p paths) {
				dir := filepath.Join(p.parent, "drm", "renderD130")
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "dev"), []byte("226:130\n"), 0o444))
				require.NoError(t, os.Symlink("../../../0000:00:02.0", filepath.Join(dir, "device")))
				require.NoError(t, os.Symlink("../../devices/pci0000:00/0000:00:02.0/drm/renderD130", filepath.Join(p.class, "renderD130")))
				mknod(t, filepath.Join(p.dri, "renderD130"), 226, 130)
			},
			skipped: map[string]reason{
				"card0":      {is: drm.ErrUnpaired, contains: "has 1 card, 2 render and 0 accel nodes"},
				"renderD128": {is: drm.ErrUnpaired, contains: "has 1 card, 2 render and 0 accel nodes"},
				"renderD130": {is: drm.ErrUnpaired, contains: "has 1 card, 2 render and 0 accel nodes"},
			},
		},
		"render node without card": {
			mutate:  func(t *testing.T, p paths) { require.NoError(t, os.Remove(filepath.Join(p.class, "card0"))) },
			skipped: map[string]reason{"renderD128": unpaired},
		},
		"invalid platform device name": {
			gpus:    []drmtest.GPU{good, {Driver: "vkms", Platform: "-vkms", Card: 0, Render: -1}},
			wantIDs: []string{amd},
			skipped: map[string]reason{"card0": {is: drm.ErrBadID, contains: `"-vkms"`}},
		},
		"platform device named all": {
			gpus:    []drmtest.GPU{good, {Driver: "vkms", Platform: "all", Card: 0, Render: -1}},
			wantIDs: []string{amd},
			skipped: map[string]reason{"card0": {is: drm.ErrBadID, contains: `"all"`}},
		},
		"duplicate ID": {
			// A platform device named like the PCI function of the good
			// card: the two cannot be told apart by ID.
			mutate: func(t *testing.T, p paths) {
				dev := filepath.Join(p.sys, "devices", "platform", amd)
				card := filepath.Join(dev, "drm", "card2")
				require.NoError(t, os.MkdirAll(card, 0o755))
				require.NoError(t, os.Symlink("../../../bus/platform", filepath.Join(dev, "subsystem")))
				require.NoError(t, os.MkdirAll(filepath.Join(p.sys, "bus", "platform", "drivers", "dup"), 0o755))
				require.NoError(t, os.Symlink("../../../bus/platform/drivers/dup", filepath.Join(dev, "driver")))
				require.NoError(t, os.WriteFile(filepath.Join(card, "dev"), []byte("226:2\n"), 0o444))
				require.NoError(t, os.Symlink("../../../"+amd, filepath.Join(card, "device")))
				require.NoError(t, os.Symlink("../../devices/platform/"+amd+"/drm/card2", filepath.Join(p.class, "card2")))
				mknod(t, filepath.Join(p.dri, "card2"), 226, 2)
			},
			wantIDs: []string{intel},
			skipped: map[string]reason{
				"card1":      {is: drm.ErrDuplicateID, contains: "also the ID of"},
				"renderD129": {is: drm.ErrSibling, contains: "card1 of device"},
				"card2":      {is: drm.ErrDuplicateID, contains: "also the ID of"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gpus := tc.gpus
			if gpus == nil {
				gpus = []drmtest.GPU{drmtest.IntelIGPU, good}
			}
			tree := drmtest.MustBuild(t, gpus...)
			roots := tree.Roots()
			parent, err := tree.DevicePath(gpus[0].ID())
			require.NoError(t, err)
			if tc.mutate != nil {
				tc.mutate(t, paths{
					sys:    roots.Sysfs,
					class:  filepath.Join(roots.Sysfs, "class", "drm"),
					parent: parent,
					dri:    filepath.Join(roots.Dev, "dri"),
					tree:   tree,
				})
			}
			inv, err := drm.Discover(roots)
			require.NoError(t, err)

			wantIDs := tc.wantIDs
			if wantIDs == nil {
				wantIDs = []string{amd}
			}
			var ids []string
			for _, c := range inv.Cards {
				ids = append(ids, c.ID)
			}
			require.Equal(t, wantIDs, ids)

			var msgs []string
			for _, e := range inv.Skipped {
				msgs = append(msgs, e.Error())
			}
			require.Len(t, inv.Skipped, len(tc.skipped), strings.Join(msgs, "\n"))
			for entry, want := range tc.skipped {
				prefix := "skip DRM entry " + filepath.Join(roots.Sysfs, "class", "drm", entry) + ": "
				found := false
				for _, e := range inv.Skipped {
					if !strings.HasPrefix(e.Error(), prefix) {
						continue
					}
					found = true
					require.Contains(t, e.Error(), want.contains)
					if want.is != nil {
						require.ErrorIs(t, e, want.is)
					}
					if want.under != "" {
						require.Contains(t, e.Error(), filepath.Join(tree.Root(), want.under))
					}
				}
				require.True(t, found, "no error for %s in:\n%s", entry, strings.Join(msgs, "\n"))
			}
		})
	}
}

func TestDiscoverUnreadableClass(t *testing.T) {
	sys := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "class"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sys, "class", "drm"), nil, 0o644))
	_, err := drm.Discover(drm.Roots{Sysfs: sys, Dev: t.TempDir()})
	require.ErrorContains(t, err, filepath.Join(sys, "class", "drm"))
}

func TestDiscoverEmptyRoots(t *testing.T) {
	_, err := drm.Discover(drm.Roots{Sysfs: "", Dev: "/dev"})
	require.ErrorContains(t, err, "empty root")
}
