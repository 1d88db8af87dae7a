// Package drm discovers the DRM cards and compute accelerators of a node
// from sysfs and checks their device nodes under /dev.
//
// # Roots
//
// Discovery reads only through a Roots value: Sysfs stands for /sys and
// Dev for /dev. The agent passes the host's trees (DefaultRoots, or where
// a container mounts them); tests pass fake trees built with the drmtest
// package.
//
// # What is a card
//
// Discover walks <sysfs>/class/drm and looks only at "cardN" and
// "renderDN" entries; connectors (card0-DP-1), "version" and anything
// else are ignored. A card node and a render node belong to the same card
// when their `device` links resolve to the same parent device. Numbers
// are never used for pairing: simpledrm can own card0 while i915 is card1
// with renderD128. A card without a render node is display-only.
//
// Discover also walks <sysfs>/class/accel, the DRM accel subsystem's
// compute accelerators (intel_vpu, amdxdna, qaic, rocket, ethosu,
// habanalabs), and looks at "accelN" entries, whose nodes are
// /dev/accel/accelN (char major 261, AccelMajor). Such a device is a Card
// of class accel: no card or render node, its accel node instead; it has
// a stable ID, driver and bus like any card. Entries of class/drm and
// class/accel are grouped by parent device alike: a parent with both a
// card and an accel node is one device holding both (named after its
// card), never two devices with one ID. habanalabs' control nodes
// (accel_controlD<N>, dynamic major) manage the device for every user
// and are never advertised: each is listed in Inventory.Skipped with
// ErrControlNode, and CharDeviceCard names no owner for one.
//
// Each card gets:
//   - a stable ID: the PCI address of the parent device; for a virtio
//     parent (virtioN, numbered in probe order) the transport device above
//     it, which is the PCI function for virtio-pci; otherwise the parent's
//     own name (vkms, simple-framebuffer.0). USB or SPI displays are named
//     after their own device, never after their host controller.
//   - the driver: the last element of the parent's `driver` link; platform
//     and faux devices without a driver of their own (vkms) are named
//     after the device. `driver` and `subsystem` links are read for their
//     name only: a target of the kernel's shape (…/drivers/<name>,
//     …/bus/<name>) need not resolve, so a copy of a host's tree without
//     /sys/bus is discovered like the host;
//   - the bus (the parent's `subsystem` link), PCI vendor and device IDs,
//     and the NUMA node (-1 when unknown);
//   - the card and render nodes under <dev>/dri, and the accel node under
//     <dev>/accel, which must be char devices with the numbers from sysfs
//     `dev`; their mode and owner come from the host node;
//   - every <dev>/dri/by-path link that resolves to one of those nodes
//     (accel nodes have none).
//
// # Companion nodes
//
// Discovery attaches no other node. Companions resolves the companion
// nodes a card's pool asks for (a Companion: a kernel subsystem whose
// nodes are tied to the card in sysfs, or a path or glob under /dev) and
// accepts a node only if the kernel registered its number in a subsystem
// of CompanionSubsystems (or as one of the CompanionMisc devices); a DRM
// or accel node never is one. DefaultCompanions gives amdgpu /dev/kfd.
// The config package calls it for each card's pool
// (config.Config.Discover).
//
// # Malformed entries
//
// An entry that cannot be read completely (garbage `dev`, dangling or
// looping links, links out of the sysfs root, a node missing or different
// under the dev root, unreadable attributes, an invalid or duplicate ID)
// is left out together with every other entry of the same device, so a
// card is reported whole or not at all. Inventory.Skipped holds one error
// per left-out entry, naming the path and the reason; the sentinel errors
// of this package tell the reasons apart with errors.Is.
//
// # Example
//
//	inv, err := drm.Discover(drm.DefaultRoots)
//	if err != nil {
//		return err
//	}
//	for _, c := range inv.Cards {
//		fmt.Println(c.ID, c.Driver, c.CardNode.Path)
//	}
package drm
