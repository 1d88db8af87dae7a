package drmtest

import (
	"fmt"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// GPU describes one fake DRM device: its parent device in sysfs and its
// nodes in the dev tree.
type GPU struct {
	// Driver is the kernel driver bound to the DRM parent device (i915,
	// amdgpu, virtio_gpu, simple-framebuffer, ...). Empty means the parent
	// has no driver link, as vkms's platform device on older kernels.
	Driver string
	// Bus is the DRM parent's bus: "pci", "virtio" (a virtioN device below
	// the PCI function PCIAddress) or "platform". Empty means "pci" when
	// PCIAddress is set, else "platform".
	Bus string
	// PCIAddress is the PCI function (0000:00:02.0) for pci and virtio.
	PCIAddress string
	// Vendor and Device are the PCI IDs as lowercase hex without 0x.
	Vendor, Device string
	// NUMA is written to the PCI function's numa_node.
	NUMA int
	// Card and Render are the minor numbers of cardN and renderDN;
	// Render < 0 makes a display-only card.
	Card, Render int
	// KFD adds /dev/kfd (amdgpu compute).
	KFD bool
	// Platform is the platform device name (vkms, simple-framebuffer.0)
	// when the card is not on PCI.
	Platform string
	// PlatformBus, when set, is the SoC bus node the platform device
	// sits below (soc: sys/devices/platform/soc/<Platform>).
	PlatformBus string
	// VirtioIndex is N of the virtioN device for Bus "virtio".
	VirtioIndex int
	// Connectors are connector names (DP-1, HDMI-A-1) created as
	// cardN-<name> entries, which discovery must ignore.
	Connectors []string
	// Class is drm.ClassAccel for a compute accelerator: the device
	// registers /dev/accel/accel<Card> (char major 261) instead of a
	// card node, and has no render node (Render must be -1). Empty means
	// a DRM card.
	Class string
	// Control adds habanalabs' accel_controlD<Card> node to an accel
	// device (class accel, char major ControlMajor).
	Control bool
}

// accel reports whether g is an accel device.
func (g GPU) accel() bool { return g.Class == drm.ClassAccel }

// ID is the stable ID discovery reports for g: the PCI address, else the
// platform device name.
func (g GPU) ID() string {
	if g.PCIAddress != "" {
		return g.PCIAddress
	}
	return g.Platform
}

// WithNodes returns g with other card and render minors (render < 0:
// display-only). For an accel device card is the accel minor and render
// must be -1.
func (g GPU) WithNodes(card, render int) GPU {
	g.Card, g.Render = card, render
	return g
}

// WithPCI returns g at another PCI address.
func (g GPU) WithPCI(addr string) GPU {
	g.PCIAddress = addr
	return g
}

// WithNUMA returns g on another NUMA node.
func (g GPU) WithNUMA(node int) GPU {
	g.NUMA = node
	return g
}

// bus returns the effective bus of g.
func (g GPU) bus() string {
	switch {
	case g.Bus != "":
		return g.Bus
	case g.PCIAddress != "":
		return "pci"
	default:
		return "platform"
	}
}

// Ready-made devices modelled on real hosts. Their card and render minors
// suit each alone; combine them with WithNodes and WithPCI.
var (
	// IntelIGPU is an Intel integrated GPU (Meteor Lake) driven by i915.
	IntelIGPU = GPU{Driver: "i915", PCIAddress: "0000:00:02.0", Vendor: "8086", Device: "7d55",
		NUMA: -1, Card: 0, Render: 128, Connectors: []string{"eDP-1", "DP-1", "HDMI-A-1"}}
	// IntelXe is an Intel discrete GPU (Battlemage) driven by xe.
	IntelXe = GPU{Driver: "xe", PCIAddress: "0000:03:00.0", Vendor: "8086", Device: "e20b",
		NUMA: 0, Card: 0, Render: 128, Connectors: []string{"DP-1", "DP-2", "HDMI-A-1"}}
	// AMDdGPU is an AMD discrete GPU (Navi 31) with /dev/kfd.
	AMDdGPU = GPU{Driver: "amdgpu", PCIAddress: "0000:03:00.0", Vendor: "1002", Device: "744c",
		NUMA: 0, Card: 0, Render: 128, KFD: true, Connectors: []string{"DP-1", "HDMI-A-1"}}
	// VirtioGPU is a QEMU virtio-gpu: virtio1 below the virtio-pci function.
	VirtioGPU = GPU{Driver: "virtio_gpu", Bus: "virtio", PCIAddress: "0000:00:04.0", Vendor: "1af4",
		Device: "1050", NUMA: -1, Card: 0, Render: 128, VirtioIndex: 1, Connectors: []string{"Virtual-1"}}
	// ASpeedBMC is the display-only BMC VGA of many servers (ast), on PCI
	// without a render node.
	ASpeedBMC = GPU{Driver: "ast", PCIAddress: "0000:02:00.0", Vendor: "1a03", Device: "2000",
		NUMA: 0, Card: 0, Render: -1, Connectors: []string{"VGA-1"}}
	// Simpledrm is the firmware framebuffer that simpledrm drives: a
	// display-only platform card that usually takes card0 at boot.
	Simpledrm = GPU{Driver: "simple-framebuffer", Platform: "simple-framebuffer.0", Card: 0, Render: -1,
		Connectors: []string{"Unknown-1"}}
	// VKMS is the virtual KMS driver: a display-only platform card whose
	// platform device has no driver link.
	VKMS = GPU{Platform: "vkms", Card: 0, Render: -1, Connectors: []string{"Virtual-1"}}

	// IntelNPU is the NPU of a Meteor Lake SoC (intel_vpu), a PCI
	// processing accelerator with /dev/accel/accel0.
	IntelNPU = GPU{Class: drm.ClassAccel, Driver: "intel_vpu", PCIAddress: "0000:00:0b.0", Vendor: "8086",
		Device: "7d1d", NUMA: -1, Card: 0, Render: -1}
	// AMDXDNA is the NPU of a Ryzen AI (Phoenix) SoC (amdxdna), a PCI
	// function of the APU below a root port.
	AMDXDNA = GPU{Class: drm.ClassAccel, Driver: "amdxdna", PCIAddress: "0000:c6:00.1", Vendor: "1022",
		Device: "1502", NUMA: -1, Card: 0, Render: -1}
	// HabanaGaudi2 is a Gaudi2 (habanalabs): accel0 and its control
	// node accel_controlD0.
	HabanaGaudi2 = GPU{Class: drm.ClassAccel, Driver: "habanalabs", PCIAddress: "0000:4d:00.0", Vendor: "1da3",
		Device: "1020", NUMA: 0, Card: 0, Render: -1, Control: true}
	// RK3588Panthor is the Mali-G610 of an RK3588 SoC on mainline
	// (panthor), a platform device next to RK3588Rocket.
	RK3588Panthor = GPU{Driver: "panthor", Platform: "fb000000.gpu", Card: 0, Render: 128}
	// RK3588Rocket is the NPU of the same RK3588 SoC on mainline
	// (rocket), an accel platform device.
	RK3588Rocket = GPU{Class: drm.ClassAccel, Driver: "rocket", Platform: "fdab0000.npu", Card: 0, Render: -1}
	// PiV3D is the 3D block of a Raspberry-Pi-like SoC (v3d), below the
	// SoC bus node soc, next to PiVC4 and the V4L2 codec of PiCodecs.
	PiV3D = GPU{Driver: "v3d", Platform: "fec00000.v3d", PlatformBus: "soc", Card: 1, Render: 128}
	// PiVC4 is the display block of the same SoC (vc4-drm), display-only.
	PiVC4 = GPU{Driver: "vc4-drm", Platform: "gpu", PlatformBus: "soc", Card: 0, Render: -1, Connectors: []string{"HDMI-A-1"}}
)

// ManyIntel returns n Intel discrete GPUs on PCI buses 1..n, cards 0..n-1
// and render nodes 128..128+n-1. n must be at most 255.
func ManyIntel(n int) []GPU {
	gpus := make([]GPU, 0, n)
	for i := 0; i < n; i++ {
		g := IntelXe
		g.PCIAddress = fmt.Sprintf("0000:%02x:00.0", i+1)
		g.NUMA = i % 2
		g.Card, g.Render = i, 128+i
		gpus = append(gpus, g)
	}
	return gpus
}

// Mixed returns n discrete GPUs that cycle through xe, i915, amdgpu (with
// /dev/kfd) and virtio-gpu, on PCI buses 1..n. n must be at most 255.
func Mixed(n int) []GPU {
	kinds := []GPU{IntelXe, IntelIGPU, AMDdGPU, VirtioGPU}
	gpus := make([]GPU, 0, n)
	for i := 0; i < n; i++ {
		g := kinds[i%len(kinds)]
		g.PCIAddress = fmt.Sprintf("0000:%02x:00.0", i+1)
		g.Card, g.Render = i, 128+i
		g.VirtioIndex = i
		gpus = append(gpus, g)
	}
	return gpus
}

// Bench128 returns 128 mixed GPUs, the large-node benchmark case.
func Bench128() []GPU { return Mixed(128) }
