package cdi

import (
	"fmt"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// Card builders for tests. Host paths live under a fake dev root so that
// the CDI library's host lookups never see the real /dev.
const devRoot = "/run/fake-node/dev"

func node(path string, major, minor uint32) drm.DeviceNode {
	return drm.DeviceNode{Path: path, HostPath: devRoot + path[len("/dev"):], Major: major, Minor: minor, Mode: 0o660, GID: 44}
}

// pciCard returns a card with a card node, an optional render node (render
// < 0 means display-only) and its by-path links.
func pciCard(id, driver, vendor, device string, card, render int) drm.Card {
	c := drm.Card{
		ID: id, Name: fmt.Sprintf("card%d", card), Driver: driver, Bus: "pci",
		PCIAddress: id, VendorID: vendor, DeviceID: device, NUMANode: -1,
		SysfsPath: "/sys/devices/pci0000:00/" + id,
		CardNode:  node(fmt.Sprintf("/dev/dri/card%d", card), 226, uint32(card)),
		ByPath:    []drm.DeviceNode{node("/dev/dri/by-path/pci-"+id+"-card", 226, uint32(card))},
	}
	if render >= 0 {
		r := node(fmt.Sprintf("/dev/dri/renderD%d", render), 226, uint32(render))
		c.RenderNode = &r
		c.ByPath = append(c.ByPath, node("/dev/dri/by-path/pci-"+id+"-render", 226, uint32(render)))
	}
	return c
}

func i915(id string, card, render int) drm.Card {
	return pciCard(id, "i915", "8086", "56a0", card, render)
}

func amdgpu(id string, card, render int) drm.Card {
	c := pciCard(id, "amdgpu", "1002", "73bf", card, render)
	c.Extra = []drm.DeviceNode{node("/dev/kfd", 235, 0)}
	return c
}

func platformCard(id, driver string, card, render int) drm.Card {
	c := drm.Card{
		ID: id, Name: fmt.Sprintf("card%d", card), Driver: driver, Bus: "platform", NUMANode: -1,
		SysfsPath: "/sys/devices/platform/" + id,
		CardNode:  node(fmt.Sprintf("/dev/dri/card%d", card), 226, uint32(card)),
	}
	if render >= 0 {
		r := node(fmt.Sprintf("/dev/dri/renderD%d", render), 226, uint32(render))
		c.RenderNode = &r
	}
	return c
}

// accelCard is an accel device (no card node) with /dev/accel/accel<minor>.
func accelCard(id, driver, bus string, minor int) drm.Card {
	a := node(fmt.Sprintf("/dev/accel/accel%d", minor), drm.AccelMajor, uint32(minor))
	c := drm.Card{
		ID: id, Name: fmt.Sprintf("accel%d", minor), Driver: driver, Bus: bus, NUMANode: -1,
		SysfsPath: "/sys/devices/platform/" + id,
		AccelNode: &a,
	}
	if bus == "pci" {
		c.PCIAddress, c.SysfsPath = id, "/sys/devices/pci0000:00/"+id
	}
	return c
}

// manyCards returns n PCI cards with distinct IDs and nodes.
func manyCards(n int) []drm.Card {
	cards := make([]drm.Card, n)
	for i := range cards {
		cards[i] = i915(fmt.Sprintf("0000:%02x:00.0", i+1), i, 128+i)
	}
	return cards
}
