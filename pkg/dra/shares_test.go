package dra

import (
	"context"
	"testing"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"github.com/stretchr/testify/require"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// sharedPools is testPools with the i915 cards in a pool of shares
// shares; the amdgpu card stays in its exclusive default pool.
func sharedPools(t *testing.T, shares int) []config.Pool {
	t.Helper()
	cfg, err := config.Parse([]byte("pools:\n- resource: dri-cdi.dev/i915\n  drivers: [i915]\n  shares: " + itoa(shares) + "\n"))
	require.NoError(t, err)
	var cards []drm.Card
	for _, p := range testPools() {
		cards = append(cards, p.Cards...)
	}
	return cfg.Assign(cards)
}

func itoa(n int) string { return resource.NewQuantity(int64(n), resource.DecimalSI).String() }

// newSharedDriver is newDriver with the i915 cards shared, on a node
// without dmem.
func newSharedDriver(t *testing.T, data string, shares int) *Driver {
	return newSharedDriverOn(t, data, shares, t.TempDir())
}

// newSharedDriverOn is newSharedDriver reading the cgroup root cgroups.
func newSharedDriverOn(t *testing.T, data string, shares int, cgroups string) *Driver {
	t.Helper()
	d, err := NewDriver(Options{NodeName: node, Kind: cdi.DefaultKind, SysfsRoot: t.TempDir(), CgroupRoot: cgroups,
		PluginDataDir: data, API: apiOf(fakeClient()), Log: testEntry(t)})
	require.NoError(t, err)
	require.NoError(t, d.Update(sharedPools(t, shares), nil))
	return d
}

// share is a result of one allocation of a shared device: its share ID
// and, when consumed > 0, the shares the scheduler recorded for it.
func share(request, device, id string, consumed int64) draapi.DeviceRequestAllocationResult {
	r := result(request, device)
	r.ShareID = ptr.To(types.UID(id))
	if consumed > 0 {
		r.ConsumedCapacity = map[draapi.QualifiedName]resource.Quantity{CapacityShares: *resource.NewQuantity(consumed, resource.DecimalSI)}
	}
	return r
}

// A pool with shares publishes each card once, shareable, with a share
// capacity whose policy makes a claim that names no amount take one; a
// pool without them publishes exclusive cards.
func TestSharedPoolPublishesConsumableCapacity(t *testing.T) {
	inv, _ := Build(sharedPools(t, 3), nil, t.TempDir()) // no sysfs: no pcieRoot attributes, which this test does not need
	byName := map[string]draapi.Device{}
	for _, d := range inv.Devices {
		byName[d.Name] = d
	}
	require.Len(t, byName, 3, "one device per card")
	intel, amd := byName["pci-0000-01-00-0"], byName["pci-0000-03-00-0"]
	require.Equal(t, ptr.To(true), intel.AllowMultipleAllocations)
	c, ok := intel.Capacity[CapacityShares]
	require.True(t, ok)
	require.Equal(t, int64(3), c.Value.Value())
	require.NotNil(t, c.RequestPolicy)
	require.Equal(t, int64(1), c.RequestPolicy.Default.Value(), "a claim that names no amount takes one share")
	require.Equal(t, int64(1), c.RequestPolicy.ValidRange.Min.Value())
	require.Equal(t, int64(3), c.RequestPolicy.ValidRange.Max.Value())
	require.Equal(t, int64(1), c.RequestPolicy.ValidRange.Step.Value())
	require.Equal(t, 3, inv.ByName["pci-0000-01-00-0"].Shares)

	require.Nil(t, amd.AllowMultipleAllocations, "an exclusive pool's card is not shareable")
	require.Empty(t, amd.Capacity)
	require.Zero(t, inv.ByName["pci-0000-03-00-0"].Shares)
}

// Shares of one card are prepared up to its capacity, counting the
// shares each consumes; an exclusive use and a share never hold one card
// together; unpreparing one share leaves the others, and frees its
// shares. The share ID goes back to the kubelet.
func TestSharesArePreparedUpToTheCapacity(t *testing.T) {
	d := newSharedDriver(t, t.TempDir(), 3)
	ctx := context.Background()
	const dev = "pci-0000-01-00-0"
	a := allocated("a", "uid-a", share("gpu", dev, "share-a", 0))
	b := allocated("b", "uid-b", share("gpu", dev, "share-b", 2))
	c := allocated("c", "uid-c", share("gpu", dev, "share-c", 1))

	got, err := d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{a, b, c})
	require.NoError(t, err)
	require.NoError(t, got["uid-a"].Err)
	require.NoError(t, got["uid-b"].Err)
	require.ErrorIs(t, got["uid-c"].Err, ErrAlreadyInUse)
	require.ErrorContains(t, got["uid-c"].Err, "ns/a (uid-a), ns/b (uid-b), which hold its shares (4 of 3 with this one)")
	require.Equal(t, ptr.To(types.UID("share-a")), got["uid-a"].Devices[0].ShareID)
	require.Equal(t, []string{cdi.QualifiedName(cdi.DefaultKind, "0000:01:00.0")}, got["uid-a"].Devices[0].CDIDeviceIDs)

	prepared, err := d.Prepared()
	require.NoError(t, err)
	require.Equal(t, PreparedDevice{Request: "gpu", Pool: node, Device: dev, Card: "0000:01:00.0",
		CDI: []string{cdi.QualifiedName(cdi.DefaultKind, "0000:01:00.0")}, Resource: "dri-cdi.dev/i915",
		ShareID: "share-b", Shares: 2}, prepared["uid-b"].Devices[0])

	_, err = d.UnprepareResourceClaims(ctx, []ClaimRef{ref(b)})
	require.NoError(t, err)
	prepared, err = d.Prepared()
	require.NoError(t, err)
	require.Contains(t, prepared, "uid-a", "unpreparing one share leaves the others")
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{c})
	require.NoError(t, err)
	require.NoError(t, got["uid-c"].Err, "b's shares are free again")

	// An exclusive use of the card (an allocation without a share ID)
	// conflicts with the shares, and the other way round.
	whole := allocated("whole", "uid-whole", result("gpu", dev))
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{whole})
	require.NoError(t, err)
	require.ErrorIs(t, got["uid-whole"].Err, ErrAlreadyInUse)
	_, err = d.UnprepareResourceClaims(ctx, []ClaimRef{ref(a), ref(c)})
	require.NoError(t, err)
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{whole, a})
	require.NoError(t, err)
	require.NoError(t, got["uid-whole"].Err)
	require.ErrorIs(t, got["uid-a"].Err, ErrAlreadyInUse)
}

// One claim may hold two shares of one card (two requests); the same
// share twice, a share of a card whose pool has no shares, and an amount
// the card cannot have are malformed.
func TestShareResultsAreChecked(t *testing.T) {
	d := newSharedDriver(t, t.TempDir(), 2)
	ctx := context.Background()
	const dev = "pci-0000-01-00-0"
	tests := map[string]struct {
		results []draapi.DeviceRequestAllocationResult
		err     string
	}{
		"two shares of one card":     {results: []draapi.DeviceRequestAllocationResult{share("a", dev, "s1", 1), share("b", dev, "s2", 1)}},
		"three shares of two":        {results: []draapi.DeviceRequestAllocationResult{share("a", dev, "s1", 1), share("b", dev, "s2", 2)}, err: "this claim, which hold its shares (3 of 2 with this one)"},
		"one share twice":            {results: []draapi.DeviceRequestAllocationResult{share("a", dev, "s1", 1), share("b", dev, "s1", 1)}, err: `malformed allocation: device "pci-0000-01-00-0" allocated twice`},
		"share of an exclusive card": {results: []draapi.DeviceRequestAllocationResult{share("a", "pci-0000-03-00-0", "s1", 1)}, err: "is allocated as share s1, but its pool has no shares on this node"},
		"more shares than the card":  {results: []draapi.DeviceRequestAllocationResult{share("a", dev, "s1", 3)}, err: "share s1 consumes 3 shares, the card has 2"},
		"a fraction of a share":      {results: []draapi.DeviceRequestAllocationResult{{Request: "a", Driver: DriverName, Pool: node, Device: dev, ShareID: ptr.To(types.UID("s1")), ConsumedCapacity: map[draapi.QualifiedName]resource.Quantity{CapacityShares: resource.MustParse("500m")}}}, err: "share s1 consumes 500m shares"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := allocated("c", "uid-"+name, tc.results...)
			got, err := d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{c})
			require.NoError(t, err)
			if tc.err == "" {
				require.NoError(t, got[c.UID].Err)
				_, err = d.UnprepareResourceClaims(ctx, []ClaimRef{ref(c)})
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, got[c.UID].Err, tc.err)
			prepared, err := d.Prepared()
			require.NoError(t, err)
			require.Empty(t, prepared)
		})
	}
}

// Shares survive a restart of the plugin (the checkpoint records each),
// a repeated prepare of an unchanged share answers from the record, and
// one whose share ID changed is prepared again.
func TestSharesSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	const dev = "pci-0000-01-00-0"
	a := allocated("a", "uid-a", share("gpu", dev, "share-a", 1))
	b := allocated("b", "uid-b", share("gpu", dev, "share-b", 1))
	got, err := newSharedDriver(t, dir, 2).PrepareResourceClaims(ctx, []*draapi.ResourceClaim{a, b})
	require.NoError(t, err)
	require.NoError(t, got["uid-a"].Err)
	require.NoError(t, got["uid-b"].Err)

	d := newSharedDriver(t, dir, 2)
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{a})
	require.NoError(t, err)
	require.NoError(t, got["uid-a"].Err)
	require.Equal(t, ptr.To(types.UID("share-a")), got["uid-a"].Devices[0].ShareID)
	c := allocated("c", "uid-c", share("gpu", dev, "share-c", 1))
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{c})
	require.NoError(t, err)
	require.ErrorIs(t, got["uid-c"].Err, ErrAlreadyInUse, "the restarted plugin counts both recorded shares")

	moved := allocated("a", "uid-a", share("gpu", dev, "share-a2", 1))
	require.False(t, sameAllocation(mustPrepared(t, d)["uid-a"], moved))
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{moved})
	require.NoError(t, err)
	require.NoError(t, got["uid-a"].Err)
	require.Equal(t, "share-a2", mustPrepared(t, d)["uid-a"].Devices[0].ShareID)
}

// sliceDevices is the devices of the node's slices in the fake API
// server, by name.
func sliceDevices(t *testing.T, client *fake.Clientset) map[string]draapi.Device {
	t.Helper()
	l, err := listSlices(client)
	require.NoError(t, err)
	out := map[string]draapi.Device{}
	for _, s := range l {
		for _, d := range s.Spec.Devices {
			out[d.Name] = d
		}
	}
	return out
}

// An API server that keeps the shares: the shared cards stay shareable
// in the slice, and their shares are prepared (the share ID reaches the
// kubelet through the DRA service).
func TestSharesKeptByTheAPIServer(t *testing.T) {
	client := fakeClient()
	e := start(t, kubelettest.ShortDir(t), kubelettest.ShortDir(t), client, "", sharedPools(t, 2), nil)
	require.Eventually(t, func() bool {
		d, ok := sliceDevices(t, client)["pci-0000-01-00-0"]
		return ok && keptShares(d)
	}, 30*time.Second, 10*time.Millisecond)
	a := e.claim("a", "uid-a", share("gpu", "pci-0000-01-00-0", "share-a", 1))
	b := e.claim("b", "uid-b", share("gpu", "pci-0000-01-00-0", "share-b", 1))
	got := e.prepare(a, b)
	require.Empty(t, got["uid-a"].Error)
	require.Empty(t, got["uid-b"].Error)
	require.Equal(t, "share-a", got["uid-a"].Devices[0].GetShareId())
	require.Equal(t, "share-b", got["uid-b"].Devices[0].GetShareId())
	// The check ran and found the shares: they stay.
	require.Never(t, func() bool { return !e.d.currentInventory().publishesShares() }, time.Second, 50*time.Millisecond)
}

// An API server that drops the fields it does not know (what one without
// DRA consumable capacity does) gets the cards republished as exclusive
// devices, and shares are refused from then on, naming the reason.
func TestSharesDroppedByTheAPIServerFallBackToExclusive(t *testing.T) {
	client := fakeClient()
	onSliceWrite(client, func(s *resourcev1.ResourceSlice) {
		for i := range s.Spec.Devices {
			s.Spec.Devices[i].AllowMultipleAllocations = nil
			s.Spec.Devices[i].Capacity = nil
		}
	})
	e := start(t, kubelettest.ShortDir(t), kubelettest.ShortDir(t), client, "", sharedPools(t, 2), nil)
	require.Eventually(t, func() bool { return !e.d.currentInventory().publishesShares() }, 30*time.Second, 10*time.Millisecond,
		"the plugin must stop publishing shares the API server drops")
	require.Equal(t, 0, e.d.currentInventory().ByName["pci-0000-01-00-0"].Shares)
	a := e.claim("a", "uid-a", share("gpu", "pci-0000-01-00-0", "share-a", 1))
	got := e.prepare(a)
	require.Contains(t, got["uid-a"].Error, "its pool has no shares on this node")

	// The loop's next pass keeps the fallback.
	require.NoError(t, e.d.Update(sharedPools(t, 2), nil))
	require.False(t, e.d.currentInventory().publishesShares())
}

// currentInventory is the devices of the last pass, as published.
func (d *Driver) currentInventory() Inventory {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.inv
}

// publishesShares reports whether a device of inv is published with
// allowMultipleAllocations.
func (inv Inventory) publishesShares() bool {
	for _, d := range inv.Devices {
		if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations {
			return true
		}
	}
	return false
}
