package dra

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dri-cdi/dri-cdi/pkg/dmem/dmemtest"
)

const gib = int64(1) << 30

// dmemRoot is a cgroup v2 root whose kernel has dmem and where card
// 0000:01:00.0 registered two VRAM regions (12 GiB together); the other
// i915 card, 0000:00:02.0, registered none (an iGPU).
func dmemRoot(t *testing.T) string {
	t.Helper()
	return dmemtest.Root(t, map[string]string{
		"cgroup.controllers": "cpu memory dmem\n",
		"dmem.capacity":      "drm/0000:01:00.0/vram0 8589934592\ndrm/0000:01:00.0/vram1 4294967296\n",
	})
}

// withMemoryUse adds consumed memory to a share result.
func withMemoryUse(r draapi.DeviceRequestAllocationResult, bytes int64) draapi.DeviceRequestAllocationResult {
	if r.ConsumedCapacity == nil {
		r.ConsumedCapacity = map[draapi.QualifiedName]resource.Quantity{}
	}
	r.ConsumedCapacity[CapacityMemory] = *resource.NewQuantity(bytes, resource.BinarySI)
	return r
}

// A shared card with dmem regions publishes their sum as its memory,
// with a policy whose default is one share's worth; a shared card
// without a region, and any card on a node without dmem, publish none.
func TestSharedCardPublishesMemoryWhereItHasARegion(t *testing.T) {
	d := newSharedDriverOn(t, t.TempDir(), 3, dmemRoot(t))
	byName := map[string]draapi.Device{}
	for _, dev := range d.inv.Devices {
		byName[dev.Name] = dev
	}
	mem, ok := byName["pci-0000-01-00-0"].Capacity[CapacityMemory]
	require.True(t, ok)
	require.Equal(t, 12*gib, mem.Value.Value())
	require.Equal(t, 4*gib, mem.RequestPolicy.Default.Value(), "a claim that names no amount takes one share's worth")
	require.Equal(t, int64(1<<20), mem.RequestPolicy.ValidRange.Min.Value())
	require.Equal(t, int64(1<<20), mem.RequestPolicy.ValidRange.Step.Value())
	require.Equal(t, 12*gib, mem.RequestPolicy.ValidRange.Max.Value())
	require.Equal(t, 12*gib, d.inv.ByName["pci-0000-01-00-0"].Memory)

	_, ok = byName["pci-0000-00-02-0"].Capacity[CapacityMemory]
	require.False(t, ok, "a card without a dmem region publishes no memory")
	require.Contains(t, byName["pci-0000-00-02-0"].Capacity, CapacityShares)
	require.Empty(t, byName["pci-0000-03-00-0"].Capacity, "an exclusive card has no capacities")

	noDmem := newSharedDriver(t, t.TempDir(), 3)
	for _, dev := range noDmem.inv.Devices {
		require.NotContains(t, dev.Capacity, CapacityMemory, dev.Name)
	}
}

// Prepare records the memory a share consumed in the checkpoint, for
// dri-cdi-nri; a share that consumed none records nothing (never a 0
// limit), and more than the card publishes is refused.
func TestPrepareRecordsShareMemory(t *testing.T) {
	data := t.TempDir()
	d := newSharedDriverOn(t, data, 3, dmemRoot(t))
	ctx := context.Background()
	const dev = "pci-0000-01-00-0"
	a := allocated("a", "uid-a", withMemoryUse(share("gpu", dev, "share-a", 0), 2*gib))
	b := allocated("b", "uid-b", withMemoryUse(share("gpu", dev, "share-b", 0), 0))
	c := allocated("c", "uid-c", withMemoryUse(share("gpu", dev, "share-c", 0), 13*gib))
	got, err := d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{a, b, c})
	require.NoError(t, err)
	require.NoError(t, got[a.UID].Err)
	require.NoError(t, got[b.UID].Err)
	require.ErrorIs(t, got[c.UID].Err, ErrMalformedClaim)
	require.ErrorContains(t, got[c.UID].Err, "share share-c consumes 13Gi bytes of memory, the card publishes 12884901888")

	claims, err := loadCheckpoint(filepath.Join(data, CheckpointFile))
	require.NoError(t, err)
	require.Equal(t, 2*gib, claims["uid-a"].Devices[0].Memory)
	require.Zero(t, claims["uid-b"].Devices[0].Memory)
	raw, err := os.ReadFile(filepath.Join(data, CheckpointFile))
	require.NoError(t, err)
	require.Contains(t, string(raw), `"memory":2147483648`)
	require.NotContains(t, string(raw), `"memory":0`)
}

// Prepare checks the memory of a card's shares again, as it does their
// number: shares whose memory adds up to more than the card publishes
// are refused, and unpreparing one frees its memory.
func TestShareMemoryIsCountedAtPrepare(t *testing.T) {
	d := newSharedDriverOn(t, t.TempDir(), 3, dmemRoot(t))
	ctx := context.Background()
	const dev = "pci-0000-01-00-0"
	a := allocated("a", "uid-a", withMemoryUse(share("gpu", dev, "share-a", 0), 8*gib))
	b := allocated("b", "uid-b", withMemoryUse(share("gpu", dev, "share-b", 0), 5*gib))
	got, err := d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{a})
	require.NoError(t, err)
	require.NoError(t, got[a.UID].Err)
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{b})
	require.NoError(t, err)
	require.ErrorIs(t, got[b.UID].Err, ErrAlreadyInUse)
	require.ErrorContains(t, got[b.UID].Err, "ns/a (uid-a), which hold its memory (13958643712 of 12884901888 bytes with this one)")

	unprep, err := d.UnprepareResourceClaims(ctx, []ClaimRef{ref(a)})
	require.NoError(t, err)
	require.NoError(t, unprep[a.UID])
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{b})
	require.NoError(t, err)
	require.NoError(t, got[b.UID].Err)
}
