// Package dmem reads the kernel's cgroup v2 dmem controller (Linux
// 6.14+, Documentation/admin-guide/cgroup-v2.rst, section DMEM) and
// decides whether a card's device memory can be limited in a container.
//
// # The interface
//
// The root cgroup's dmem.capacity lists each region a driver registered
// and its size in bytes, one "<region> <bytes>" line each, with region
// names drm/<device>/<region>: xe registers vram0 (and vram1 on a card
// with two tiles), amdgpu vram, i915 nothing. Every other cgroup has
// dmem.current, dmem.min, dmem.low and dmem.max with the same keys.
//
// # Enforceable
//
// A limit is set only where the runtime can write it, since a failed
// write fails the container: cgroup v2 (Host.V2), the dmem controller
// (Host.Controller), the card's region in dmem.capacity
// (Host.CardEnforceable), and dmem in the subtree_control of the
// container's parent cgroup (Host.Delegated). Everything else is an
// *Unenforceable naming the card and one of the Reason constants.
//
// # Example
//
//	h, err := dmem.ReadHost("/sys/fs/cgroup")
//	regions, why := h.CardEnforceable("0000:03:00.0")
//	if why == nil {
//		why = h.Delegated("0000:03:00.0", ctr.Linux.CgroupsPath)
//	}
//	if why == nil {
//		adj.AddLinuxUnified(dmem.MaxFile, dmem.Value(dmem.Split(regions, 4<<30)))
//	}
package dmem
