package dra

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/dmem"
	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// Attribute names in the driver's own domain (unqualified in the slice;
// in CEL device.attributes["dri-cdi.dev"].<name>).
const (
	AttrID          draapi.QualifiedName = "id"
	AttrDriver      draapi.QualifiedName = "driver"
	AttrResource    draapi.QualifiedName = "resource"
	AttrVendorID    draapi.QualifiedName = "vendorID"
	AttrDeviceID    draapi.QualifiedName = "deviceID"
	AttrBus         draapi.QualifiedName = "bus"
	AttrCardMinor   draapi.QualifiedName = "cardMinor"
	AttrRenderMinor draapi.QualifiedName = "renderMinor"
	AttrDisplayOnly draapi.QualifiedName = "displayOnly"
	// AttrClass is the device's class: drm.ClassDRM (a card) or
	// drm.ClassAccel (a compute accelerator under /dev/accel).
	AttrClass draapi.QualifiedName = "class"
	// AttrAccelMinor is N of /dev/accel/accelN, for a device with one.
	AttrAccelMinor draapi.QualifiedName = "accelMinor"
)

// CapacityShares is the capacity of a card of a pool with shares (in
// CEL device.capacity["dri-cdi.dev"].shares; in a claim's
// capacity.requests and an allocation's consumedCapacity "shares", the
// name as the device publishes it): how many shares the card has.
// A claim that names no amount takes exactly one (the request policy's
// default; without a policy it would take them all).
const CapacityShares draapi.QualifiedName = "shares"

// CapacityMemory is the device memory in bytes of a card of a pool with
// shares whose driver registered dmem regions (in CEL
// device.capacity["dri-cdi.dev"].memory; in a claim's
// capacity.requests "memory"): the sum of the card's regions in the
// kernel's dmem.capacity. A claim that names no amount takes the card's
// memory divided by its shares (memoryPolicy); dri-cdi-nri limits a
// container to what its share consumed, where the kernel enforces it.
// Cards without a region (i915, an xe iGPU without VRAM, an APU's
// carve-out) publish no memory.
const CapacityMemory draapi.QualifiedName = "memory"

// memoryStep is the unit of memory requests: amounts are rounded up to
// whole MiB by the scheduler.
const memoryStep = 1 << 20

// UnavailableTaint is the key of the taint an Unhealthy card carries.
// Its effect is NoSchedule: the scheduler allocates the card to no new
// claim, while pods that hold it keep running (the card may come back
// when its driver binds again; NoExecute would evict them for good).
const UnavailableTaint = DriverName + "/unavailable"

// UnavailableReason is the taint's value: the agent loop lists a card
// as Unhealthy when discovery stops reporting it while its sysfs device
// is still there, i.e. its driver unbound or its device nodes are gone.
const UnavailableReason = "driver-unbound-or-nodes-gone"

// Device is one published card.
type Device struct {
	// Name is the device name in the slice (DeviceName of the card ID).
	Name string
	// Card is the card's stable ID, also its CDI device name.
	Card string
	// Resource is the device-plugin resource name of the card's pool.
	Resource string
	// Healthy is false for a card listed as Unhealthy (tainted).
	Healthy bool
	// Shares is the card's number of shares when its pool shares it;
	// 0 for a card given to one claim at a time.
	Shares int
	// Memory is the card's published memory capacity in bytes
	// (CapacityMemory), 0 when it publishes none.
	Memory int64
}

// Inventory is what one reconcile pass publishes: the slice's devices
// and the same devices by name, for prepare.
type Inventory struct {
	// Devices are the slice's devices, sorted by name.
	Devices []draapi.Device
	// ByName maps each device name to its card.
	ByName map[string]Device
}

// Build turns the pools of one pass into the devices of the node's
// ResourceSlice. Every card of every pool is a device named DeviceName
// of its ID, with the attributes listed in the package doc; unhealthy
// cards (by ID) carry the UnavailableTaint. sysfsRoot is read for the
// PCIe root of PCI cards. Two cards with the same device name are both
// left out, and each problem is returned in problems (naming the
// cards) without failing the rest.
func Build(pools []config.Pool, unhealthy map[string]bool, sysfsRoot string) (inv Inventory, problems []error) {
	type entry struct {
		card   drm.Card
		res    string
		shares int
	}
	byName := map[string][]entry{}
	for _, p := range pools {
		for _, c := range p.Cards {
			n := DeviceName(c.ID)
			byName[n] = append(byName[n], entry{card: c, res: p.Resource, shares: p.Shares})
		}
	}
	inv.ByName = make(map[string]Device, len(byName))
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		es := byName[n]
		if len(es) > 1 {
			ids := make([]string, len(es))
			for i, e := range es {
				ids[i] = e.card.ID
			}
			problems = append(problems, fmt.Errorf("cards %s map to one device name %q: none of them is published", strings.Join(ids, ", "), n))
			continue
		}
		e := es[0]
		d, errs := device(n, &e.card, e.res, !unhealthy[e.card.ID], sysfsRoot)
		problems = append(problems, errs...)
		shareable(&d, e.shares)
		inv.Devices = append(inv.Devices, d)
		inv.ByName[n] = Device{Name: n, Card: e.card.ID, Resource: e.res, Healthy: !unhealthy[e.card.ID], Shares: e.shares}
	}
	return inv, problems
}

// device is the API form of one card. The standard attributes that
// cannot be read (a PCI card whose /sys/bus/pci link is missing) are
// left out and returned as problems; the card is still published.
func device(name string, c *drm.Card, resource string, healthy bool, sysfsRoot string) (draapi.Device, []error) {
	attrs := map[draapi.QualifiedName]draapi.DeviceAttribute{
		AttrID:          {StringValue: ptr.To(c.ID)},
		AttrDriver:      {StringValue: ptr.To(c.Driver)},
		AttrResource:    {StringValue: ptr.To(resource)},
		AttrBus:         {StringValue: ptr.To(c.Bus)},
		AttrDisplayOnly: {BoolValue: ptr.To(c.DisplayOnly())},
		AttrClass:       {StringValue: ptr.To(c.Class())},
	}
	// An Unhealthy card seeded without nodes has no minor to publish.
	if c.CardNode.Path != "" {
		attrs[AttrCardMinor] = draapi.DeviceAttribute{IntValue: ptr.To(int64(c.CardNode.Minor))}
	}
	if c.RenderNode != nil {
		attrs[AttrRenderMinor] = draapi.DeviceAttribute{IntValue: ptr.To(int64(c.RenderNode.Minor))}
	}
	if c.AccelNode != nil {
		attrs[AttrAccelMinor] = draapi.DeviceAttribute{IntValue: ptr.To(int64(c.AccelNode.Minor))}
	}
	if c.VendorID != "" {
		attrs[AttrVendorID] = draapi.DeviceAttribute{StringValue: ptr.To(c.VendorID)}
		attrs[AttrDeviceID] = draapi.DeviceAttribute{StringValue: ptr.To(c.DeviceID)}
	}
	problems := standardAttributes(attrs, c.ID, c.PCIAddress, c.NUMANode, sysfsRoot)
	d := draapi.Device{Name: name, Attributes: attrs}
	if !healthy {
		d.Taints = []draapi.DeviceTaint{{
			Key:    UnavailableTaint,
			Value:  UnavailableReason,
			Effect: draapi.DeviceTaintEffectNoSchedule,
		}}
	}
	return d, problems
}

// shareable makes d a device of shares shares (DRA consumable
// capacity), or leaves it exclusive when shares is 0: several claims may
// be allocated the device at once, each consuming shares of the
// CapacityShares capacity. The request policy makes a claim that asks for
// no amount take one share, and any whole number up to all of them.
func shareable(d *draapi.Device, shares int) {
	if shares <= 0 {
		return
	}
	n := resource.NewQuantity(int64(shares), resource.DecimalSI)
	d.AllowMultipleAllocations = ptr.To(true)
	d.Capacity = map[draapi.QualifiedName]draapi.DeviceCapacity{
		CapacityShares: {
			Value: *n,
			RequestPolicy: &draapi.CapacityRequestPolicy{
				Default: resource.NewQuantity(1, resource.DecimalSI),
				ValidRange: &draapi.CapacityRequestPolicyRange{
					Min:  resource.NewQuantity(1, resource.DecimalSI),
					Max:  resource.NewQuantity(int64(shares), resource.DecimalSI),
					Step: resource.NewQuantity(1, resource.DecimalSI),
				},
			},
		},
	}
}

// withMemory adds the CapacityMemory capacity to the shareable devices
// of inv whose card has dmem regions (the sum of their sizes), with a
// request policy that makes a claim naming no amount take one share's
// worth (the memory divided by the shares, in whole MiB), so that it
// never takes all of it. A card with less than one MiB per share, or
// less than two MiB, publishes none (the request policy would be invalid).
func withMemory(inv Inventory, regions []dmem.Region) Inventory {
	if len(regions) == 0 {
		return inv
	}
	for i := range inv.Devices {
		d := &inv.Devices[i]
		dev := inv.ByName[d.Name]
		if dev.Shares <= 0 || d.Capacity == nil {
			continue
		}
		total := dmem.Total(dmem.CardRegions(regions, dev.Card))
		perShare := total / int64(dev.Shares) / memoryStep * memoryStep
		// The API server wants min + step within the capacity.
		if perShare < memoryStep || total < 2*memoryStep {
			continue
		}
		d.Capacity[CapacityMemory] = draapi.DeviceCapacity{
			Value: *resource.NewQuantity(total, resource.BinarySI),
			RequestPolicy: &draapi.CapacityRequestPolicy{
				Default: resource.NewQuantity(perShare, resource.BinarySI),
				ValidRange: &draapi.CapacityRequestPolicyRange{
					Min:  resource.NewQuantity(memoryStep, resource.BinarySI),
					Max:  resource.NewQuantity(total/memoryStep*memoryStep, resource.BinarySI),
					Step: resource.NewQuantity(memoryStep, resource.BinarySI),
				},
			},
		}
		dev.Memory = total
		inv.ByName[d.Name] = dev
	}
	return inv
}
