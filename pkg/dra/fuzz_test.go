package dra

import (
	"testing"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"k8s.io/utils/ptr"

	"github.com/dri-cdi/dri-cdi/cdi"
)

// FuzzPrepareClaim: whatever allocation a claim carries, prepare never
// panics, and what it accepts maps each device of this driver, in this
// node's pool, to the CDI name of exactly the published healthy card of
// that device name; nothing else is ever handed out.
func FuzzPrepareClaim(f *testing.F) {
	f.Add(DriverName, node, "pci-0000-01-00-0", "gpu", false, DriverName, node, "pci-0000-00-02-0", "b", false)
	f.Add(DriverName, node, "pci-0000-03-00-0", "gpu", false, "other.dev", node, "x", "b", true)
	f.Add(DriverName, "node-b", "pci-0000-01-00-0", "gpu", true, DriverName, node, "pci-0000-01-00-0", "b", true)
	f.Add(DriverName, node, "pci-0000-00-02-0", "", false, DriverName, node, "", "", false)
	inv, _ := Build(testPools(), map[string]bool{"0000:03:00.0": true}, f.TempDir())
	d := &Driver{opts: Options{NodeName: node, Kind: cdi.DefaultKind}}
	held := map[string]PreparedClaim{"uid-h": {Namespace: "ns", Name: "h", Devices: []PreparedDevice{{Card: "0000:00:02.0"}}}}
	f.Fuzz(func(t *testing.T, drv1, pool1, dev1, req1 string, admin1 bool, drv2, pool2, dev2, req2 string, admin2 bool) {
		c := &draapi.ResourceClaim{Status: draapi.ResourceClaimStatus{Allocation: &draapi.AllocationResult{
			Devices: draapi.DeviceAllocationResult{Results: []draapi.DeviceRequestAllocationResult{
				{Driver: drv1, Pool: pool1, Device: dev1, Request: req1, AdminAccess: ptr.To(admin1)},
				{Driver: drv2, Pool: pool2, Device: dev2, Request: req2, AdminAccess: ptr.To(admin2)},
			}}}}}
		pc, err := d.prepareClaim(c, inv, &claimSet{claims: held})
		if err != nil {
			return
		}
		if len(pc.Devices) == 0 {
			t.Fatal("accepted a claim without devices")
		}
		for _, got := range pc.Devices {
			dev, ok := inv.ByName[got.Device]
			switch {
			case !ok:
				t.Fatalf("handed out unpublished device %q", got.Device)
			case !dev.Healthy:
				t.Fatalf("handed out unhealthy card %s", dev.Card)
			case got.Pool != node:
				t.Fatalf("accepted pool %q", got.Pool)
			case got.Card != dev.Card || len(got.CDI) != 1 || got.CDI[0] != cdi.QualifiedName(cdi.DefaultKind, dev.Card):
				t.Fatalf("device %q (card %s) mapped to %s %v", got.Device, dev.Card, got.Card, got.CDI)
			}
		}
		for i, r := range c.Status.Allocation.Devices.Results {
			if r.Driver != DriverName {
				continue
			}
			found := false
			for _, got := range pc.Devices {
				found = found || (got.Device == r.Device && got.Request == r.Request)
			}
			if !found {
				t.Fatalf("result %d of this driver (%+v) silently dropped", i, r)
			}
			if inv.ByName[r.Device].Card == "0000:00:02.0" && !*r.AdminAccess {
				t.Fatalf("card held by another claim handed out without admin access")
			}
		}
	})
}
