package drm

import "os"

// DeviceNode is one device node that belongs to a card, as a container
// should see it and as it exists on the host.
type DeviceNode struct {
	// Path is where the node appears inside a container, e.g. /dev/dri/renderD128.
	Path string `json:"path"`
	// HostPath is the node on the host, under the dev root.
	HostPath string `json:"hostPath"`
	// Major and Minor are the character device numbers, from sysfs `dev`
	// (or from the host node for companion nodes found by path).
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
	// Mode holds the permission bits of the host node (e.g. 0660).
	Mode os.FileMode `json:"mode"`
	// UID and GID own the host node.
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// Device classes: the kernel class a device's nodes are registered in.
const (
	// ClassDRM is a DRM card: /dev/dri/cardN, and renderDN when it renders.
	ClassDRM = "drm"
	// ClassAccel is a compute accelerator of the DRM accel subsystem
	// (drivers/accel): /dev/accel/accelN, char major AccelMajor.
	ClassAccel = "accel"
)

// AccelMajor is the char major of every /dev/accel/accelN node
// (ACCEL_MAJOR in include/drm/drm_accel.h).
const AccelMajor = 261

// Card is one DRM device with every node a container needs to use it: a
// DRM card (class drm) or a compute accelerator (class accel). A parent
// device with both a card and an accel node is one Card holding both.
type Card struct {
	// ID is the stable identifier: the PCI address of the DRM device's
	// parent, else of its nearest PCI ancestor, else the platform device
	// name. Never cardN.
	ID string `json:"id"`
	// Name is the kernel's current name, e.g. card1. It is not stable.
	Name string `json:"name"`
	// Driver is the kernel driver bound to the parent device (i915, xe,
	// amdgpu, virtio_gpu, vkms, simpledrm, ...).
	Driver string `json:"driver"`
	// Bus is the parent device's bus: pci, platform, virtio, ...
	Bus string `json:"bus"`
	// PCIAddress is the address of the nearest PCI device, empty when none.
	PCIAddress string `json:"pciAddress,omitempty"`
	// VendorID and DeviceID are lowercase hex PCI ids without 0x, empty
	// when the card has no PCI ancestor.
	VendorID string `json:"vendorID,omitempty"`
	DeviceID string `json:"deviceID,omitempty"`
	// NUMANode is the NUMA node of the PCI device, -1 when unknown.
	NUMANode int `json:"numaNode"`
	// SysfsPath is the resolved sysfs path of the parent device. The agent
	// uses it to tell a card whose driver unbound (path still there) from a
	// card that was removed (path gone).
	SysfsPath string `json:"sysfsPath"`
	// CardNode is the primary node, /dev/dri/cardN; the zero value (no
	// Path) for an accel device without a DRM card.
	CardNode DeviceNode `json:"cardNode"`
	// RenderNode is /dev/dri/renderDN; nil for display-only cards.
	RenderNode *DeviceNode `json:"renderNode,omitempty"`
	// AccelNode is /dev/accel/accelN; nil for a DRM card.
	AccelNode *DeviceNode `json:"accelNode,omitempty"`
	// Extra holds the card's companion nodes (see Companion), e.g.
	// /dev/kfd for amdgpu. Discovery leaves it empty; config.Discover
	// fills it (Companions).
	Extra []DeviceNode `json:"extra,omitempty"`
	// ByPath holds the /dev/dri/by-path links of this card, as nodes whose
	// Path is the link's path in the container and whose numbers are the
	// target's.
	ByPath []DeviceNode `json:"byPath,omitempty"`
}

// DisplayOnly reports whether the card has neither a render nor an
// accel node: it can only drive displays.
func (c *Card) DisplayOnly() bool { return c.RenderNode == nil && c.AccelNode == nil }

// HasCardNode reports whether the device has a DRM card node: an accel
// device, or a card without nodes (cdi.Unavailable), has none.
func (c *Card) HasCardNode() bool { return c.CardNode != (DeviceNode{}) }

// Class is ClassAccel for a device whose only node is an accel node,
// else ClassDRM.
func (c *Card) Class() string {
	if c.AccelNode != nil && !c.HasCardNode() {
		return ClassAccel
	}
	return ClassDRM
}

// DRMNodes returns the device's own nodes, those whose numbers the
// DRM core hands out and another device may hold next: card, render and
// accel, each if present.
func (c *Card) DRMNodes() []DeviceNode {
	nodes := make([]DeviceNode, 0, 3)
	if c.HasCardNode() {
		nodes = append(nodes, c.CardNode)
	}
	if c.RenderNode != nil {
		nodes = append(nodes, *c.RenderNode)
	}
	if c.AccelNode != nil {
		nodes = append(nodes, *c.AccelNode)
	}
	return nodes
}

// Nodes returns every node of the card in a stable order: card, render,
// accel, extras, by-path links.
func (c *Card) Nodes() []DeviceNode {
	nodes := make([]DeviceNode, 0, 3+len(c.Extra)+len(c.ByPath))
	nodes = append(nodes, c.DRMNodes()...)
	nodes = append(nodes, c.Extra...)
	nodes = append(nodes, c.ByPath...)
	return nodes
}

// Roots are the directories discovery reads: Sysfs stands for /sys and Dev
// for /dev. Tests and containers that mount the host's trees elsewhere
// pass other roots.
type Roots struct {
	Sysfs string
	Dev   string
}

// DefaultRoots are the host's own trees.
var DefaultRoots = Roots{Sysfs: "/sys", Dev: "/dev"}

// Inventory is the result of one discovery pass.
type Inventory struct {
	// Cards are the complete cards found, sorted by ID.
	Cards []Card
	// Skipped explains each DRM entry that was left out because it was
	// malformed; each error names the path and the reason.
	Skipped []error
	// Companions holds an error for each companion node that was refused
	// or is missing (set by whoever resolves companions, not by
	// Discover); the cards are kept, without those nodes.
	Companions []error
}
