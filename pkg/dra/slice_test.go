package dra

import (
	"testing"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// hybrid is an i915 iGPU and an amdgpu dGPU (with /dev/kfd), a BMC VGA
// without a render node and the firmware framebuffer.
var hybrid = []drmtest.GPU{
	drmtest.IntelIGPU.WithNodes(1, 128),
	drmtest.AMDdGPU.WithPCI("0000:03:00.0").WithNodes(2, 129).WithNUMA(1),
	drmtest.ASpeedBMC.WithNodes(3, -1),
	drmtest.Simpledrm.WithNodes(0, -1),
}

func discover(t *testing.T, gpus ...drmtest.GPU) (*drmtest.Tree, []drm.Card) {
	t.Helper()
	drmtest.SkipUnlessRoot(t)
	tree := drmtest.MustBuild(t, gpus...)
	inv, err := drm.Discover(tree.Roots())
	require.NoError(t, err)
	require.Empty(t, inv.Skipped)
	return tree, inv.Cards
}

func str(s string) draapi.DeviceAttribute {
	return draapi.DeviceAttribute{StringValue: ptr.To(s)}
}
func num(i int64) draapi.DeviceAttribute {
	return draapi.DeviceAttribute{IntValue: ptr.To(i)}
}
func boolAttr(b bool) draapi.DeviceAttribute {
	return draapi.DeviceAttribute{BoolValue: ptr.To(b)}
}

func TestBuildHybridNode(t *testing.T) {
	tree, cards := discover(t, hybrid...)
	inv, problems := Build(config.Default().Assign(cards), nil, tree.Roots().Sysfs)
	require.Empty(t, problems)
	// The default pools take the cards with a render node only, as the
	// device plugin does.
	require.Equal(t, []draapi.Device{
		{Name: "pci-0000-00-02-0", Attributes: map[draapi.QualifiedName]draapi.DeviceAttribute{
			"id": str("0000:00:02.0"), "driver": str("i915"), "resource": str("dri-cdi.dev/i915"), "bus": str("pci"),
			"vendorID": str("8086"), "deviceID": str("7d55"), "cardMinor": num(1), "renderMinor": num(128), "displayOnly": boolAttr(false), "class": str("drm"),
			"resource.kubernetes.io/pciBusID": str("0000:00:02.0"), "resource.kubernetes.io/pcieRoot": str("pci0000:00"),
		}},
		{Name: "pci-0000-03-00-0", Attributes: map[draapi.QualifiedName]draapi.DeviceAttribute{
			"id": str("0000:03:00.0"), "driver": str("amdgpu"), "resource": str("dri-cdi.dev/amdgpu"), "bus": str("pci"),
			"vendorID": str("1002"), "deviceID": str("744c"), "cardMinor": num(2), "renderMinor": num(129), "displayOnly": boolAttr(false), "class": str("drm"),
			"resource.kubernetes.io/pciBusID": str("0000:03:00.0"), "resource.kubernetes.io/pcieRoot": str("pci0000:00"),
			"resource.kubernetes.io/numaNode": num(1),
		}},
	}, inv.Devices)
	require.Equal(t, map[string]Device{
		"pci-0000-00-02-0": {Name: "pci-0000-00-02-0", Card: "0000:00:02.0", Resource: "dri-cdi.dev/i915", Healthy: true},
		"pci-0000-03-00-0": {Name: "pci-0000-03-00-0", Card: "0000:03:00.0", Resource: "dri-cdi.dev/amdgpu", Healthy: true},
	}, inv.ByName)
}

// Accel devices are published from the default pools of their drivers
// with the same attributes as cards, their class and accel minor, and
// no card or render minor; a platform NPU has no PCI attributes.
func TestBuildAccelDevices(t *testing.T) {
	tree, cards := discover(t, drmtest.IntelNPU, drmtest.RK3588Panthor, drmtest.RK3588Rocket.WithNodes(1, -1))
	inv, problems := Build(config.Default().Assign(cards), nil, tree.Roots().Sysfs)
	require.Empty(t, problems)
	byName := map[string]draapi.Device{}
	for _, d := range inv.Devices {
		byName[d.Name] = d
	}
	require.Len(t, byName, 3)
	require.Equal(t, map[draapi.QualifiedName]draapi.DeviceAttribute{
		"id": str("0000:00:0b.0"), "driver": str("intel_vpu"), "resource": str("dri-cdi.dev/intel_vpu"), "bus": str("pci"),
		"vendorID": str("8086"), "deviceID": str("7d1d"), "accelMinor": num(0), "displayOnly": boolAttr(false), "class": str("accel"),
		"resource.kubernetes.io/pciBusID": str("0000:00:0b.0"), "resource.kubernetes.io/pcieRoot": str("pci0000:00"),
	}, byName["pci-0000-00-0b-0"].Attributes)
	rocket := byName[DeviceName("fdab0000.npu")].Attributes
	require.Equal(t, str("rocket"), rocket[AttrDriver])
	require.Equal(t, str("accel"), rocket[AttrClass])
	require.Equal(t, str("dri-cdi.dev/rocket"), rocket[AttrResource])
	require.NotContains(t, rocket, AttrCardMinor)
	require.NotContains(t, rocket, "resource.kubernetes.io/pciBusID")
	panthor := byName[DeviceName("fb000000.gpu")].Attributes
	require.Equal(t, str("drm"), panthor[AttrClass])
	require.NotContains(t, panthor, AttrAccelMinor)
}

// A configured pool that takes display-only cards publishes them with
// their pool's resource, no render minor, and displayOnly true; a
// platform card has no PCI attributes.
func TestBuildConfiguredPoolsAndDisplayOnly(t *testing.T) {
	tree, cards := discover(t, hybrid...)
	cfg, err := config.Parse([]byte(`
defaultPools: false
pools:
- resource: example.com/display
  drivers: [ast, simple-framebuffer]
  includeDisplayOnly: true
  replicas: 1
- resource: gpu.intel.com/i915
  pciIDs: ["8086:*"]
  replicas: 1
`))
	require.NoError(t, err)
	inv, problems := Build(cfg.Assign(cards), nil, tree.Roots().Sysfs)
	require.Empty(t, problems)
	names := make([]string, 0, len(inv.Devices))
	for _, d := range inv.Devices {
		names = append(names, d.Name)
	}
	sfb := DeviceName("simple-framebuffer.0")
	require.ElementsMatch(t, []string{"pci-0000-00-02-0", "pci-0000-02-00-0", sfb}, names)
	require.Equal(t, "gpu.intel.com/i915", inv.ByName["pci-0000-00-02-0"].Resource)
	for _, d := range inv.Devices {
		switch d.Name {
		case "pci-0000-02-00-0":
			require.Equal(t, boolAttr(true), d.Attributes[AttrDisplayOnly])
			require.NotContains(t, d.Attributes, AttrRenderMinor)
			require.Equal(t, str("example.com/display"), d.Attributes[AttrResource])
			require.Equal(t, num(0), d.Attributes["resource.kubernetes.io/numaNode"])
		case sfb:
			require.Equal(t, str("simple-framebuffer.0"), d.Attributes[AttrID])
			require.Equal(t, str("platform"), d.Attributes[AttrBus])
			for _, a := range []draapi.QualifiedName{AttrVendorID, AttrDeviceID, "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot", "resource.kubernetes.io/numaNode"} {
				require.NotContains(t, d.Attributes, a)
			}
		}
	}
}

func TestBuildUnhealthyIsTainted(t *testing.T) {
	tree, cards := discover(t, hybrid...)
	inv, _ := Build(config.Default().Assign(cards), map[string]bool{"0000:03:00.0": true}, tree.Roots().Sysfs)
	require.Len(t, inv.Devices, 2)
	require.Empty(t, inv.Devices[0].Taints)
	require.Equal(t, []draapi.DeviceTaint{{Key: "dri-cdi.dev/unavailable", Value: UnavailableReason, Effect: draapi.DeviceTaintEffectNoSchedule}},
		inv.Devices[1].Taints)
	require.False(t, inv.ByName["pci-0000-03-00-0"].Healthy)
	require.True(t, inv.ByName["pci-0000-00-02-0"].Healthy)
}

// A card seeded as Unhealthy without nodes (its sysfs device left the
// tree's PCI links) is still published, tainted, without minors; the
// missing PCIe root is a problem, not a failure.
func TestBuildCardWithoutNodesOrLinks(t *testing.T) {
	c := drm.Card{ID: "0000:09:00.0", Driver: "i915", Bus: "pci", PCIAddress: "0000:09:00.0", NUMANode: -1}
	inv, problems := Build([]config.Pool{{Resource: "dri-cdi.dev/i915", Cards: []drm.Card{c}}}, map[string]bool{c.ID: true}, t.TempDir())
	require.Len(t, problems, 1)
	require.ErrorContains(t, problems[0], "card 0000:09:00.0: no resource.kubernetes.io/pcieRoot attribute")
	require.Len(t, inv.Devices, 1)
	d := inv.Devices[0]
	require.NotContains(t, d.Attributes, AttrCardMinor)
	require.Equal(t, str("0000:09:00.0"), d.Attributes["resource.kubernetes.io/pciBusID"])
	require.Len(t, d.Taints, 1)
}

// Two cards that map to one name are both left out, with an error that
// names both.
func TestBuildRefusesNameCollision(t *testing.T) {
	a := drm.Card{ID: "vkms", Driver: "vkms", Bus: "platform", NUMANode: -1, CardNode: drm.DeviceNode{Path: "/dev/dri/card0"}}
	b := a
	b.CardNode.Minor = 1
	ok := drm.Card{ID: "virtio1", Driver: "virtio_gpu", Bus: "virtio", NUMANode: -1}
	inv, problems := Build([]config.Pool{{Resource: "x/a", Cards: []drm.Card{a, ok}}, {Resource: "x/b", Cards: []drm.Card{b}}}, nil, t.TempDir())
	require.Len(t, problems, 1)
	require.EqualError(t, problems[0], `cards vkms, vkms map to one device name "vkms": none of them is published`)
	require.Len(t, inv.Devices, 1)
	require.Equal(t, "virtio1", inv.Devices[0].Name)
	require.NotContains(t, inv.ByName, "vkms")
}
