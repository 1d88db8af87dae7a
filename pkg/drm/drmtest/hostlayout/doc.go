// Package hostlayout writes sysfs and devfs trees laid out exactly as on
// real hosts, from listings kept as text, for tests of discovery, spec
// generation and the CLI.
//
// Unlike drmtest, which builds trees from a few parameters, a layout is a
// literal listing of one host's files, directories, symlinks (with the
// relative targets the kernel and udev use) and device nodes, including
// the entries discovery must ignore: connectors, i915's gt/ and engine/,
// power/, ttm, controlD64, PCIe bridges, HDMI audio functions, the kfd
// class, /dev/char links.
//
// # Listing format
//
// One entry per line, paths relative to the tree root (sys/..., dev/...);
// "#" starts a comment line. Parent directories are created as needed.
//
//	d <path>                          a directory
//	f <path> <Go-quoted content>      a regular file, mode 0444
//	l <path> <target>                 a symlink whose target resolves
//	L <path> <target>                 a symlink that must not resolve
//	c <path> <major>:<minor> <mode> <uid>:<gid>   a char device node
//	p <path>                          a FIFO
//	include <layout>                  every entry of another layout
//
// Layouts whose name starts with "_" are fragments for include only.
//
// # Example
//
//	drmtest.SkipUnlessRoot(t)
//	roots, err := hostlayout.Build(t.TempDir(), "hybrid-laptop")
//	if err != nil {
//		t.Fatal(err)
//	}
//	inv, err := drm.Discover(roots)
package hostlayout
