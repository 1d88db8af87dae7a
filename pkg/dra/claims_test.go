package dra

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/utils/ptr"

	"github.com/dri-cdi/dri-cdi/cdi"
)

// newDriver is a Driver on data with testPools published, not started:
// its prepare and unprepare are called directly, without the helper that
// serializes them in production.
func newDriver(t *testing.T, data string) *Driver {
	t.Helper()
	d, err := NewDriver(Options{NodeName: node, Kind: cdi.DefaultKind, SysfsRoot: t.TempDir(),
		PluginDataDir: data, KubeClient: fakeClient(), Log: testEntry(t)})
	require.NoError(t, err)
	require.NoError(t, d.Update(testPools(), nil))
	return d
}

// allocated is an allocated claim in namespace ns.
func allocated(name, uid string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Status:     resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}},
	}
}

func ref(c *resourceapi.ResourceClaim) kubeletplugin.NamespacedObject {
	return kubeletplugin.NamespacedObject{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, UID: c.UID}
}

// The store serializes prepare on its own: claims for one card prepared
// at once, by calls nobody serializes, give the card to exactly one of
// them, and the checkpoint records that one.
func TestClaimStoreSerializesPrepare(t *testing.T) {
	d := newDriver(t, t.TempDir())
	const n = 8
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		winners []string
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := allocated(fmt.Sprint("c", i), fmt.Sprint("uid-", i), result("gpu", "pci-0000-01-00-0"))
			<-start
			got, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
			if !assert.NoError(t, err) {
				return
			}
			if got[c.UID].Err == nil {
				mu.Lock()
				winners = append(winners, string(c.UID))
				mu.Unlock()
			} else {
				assert.ErrorIs(t, got[c.UID].Err, ErrAlreadyInUse)
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Len(t, winners, 1)
	prepared, err := d.Prepared()
	require.NoError(t, err)
	require.Len(t, prepared, 1)
	require.Contains(t, prepared, winners[0])
}

// What counts as in use: an ordinary device conflicts with every
// prepared claim's device on its card, admin access or not; an admin
// device with none. Every recorded device keeps its card in use for the
// agent, and unpreparing one claim leaves the other claims' devices on
// the same card.
func TestClaimStoreInUseRules(t *testing.T) {
	d := newDriver(t, t.TempDir())
	ctx := context.Background()
	admin := result("mon", "pci-0000-01-00-0")
	admin.AdminAccess = ptr.To(true)
	work := allocated("work", "uid-work", result("gpu", "pci-0000-01-00-0"))
	monitor := allocated("monitor", "uid-monitor", admin)
	other := allocated("other", "uid-other", result("gpu", "pci-0000-01-00-0"))

	got, err := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{work, monitor, other})
	require.NoError(t, err)
	require.NoError(t, got["uid-work"].Err)
	require.NoError(t, got["uid-monitor"].Err, "admin access is not kept from a card in use")
	require.ErrorIs(t, got["uid-other"].Err, ErrAlreadyInUse)
	held, err := d.CardsInUse()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"0000:01:00.0": "dri-cdi.dev/i915"}, held)

	// The admin claim holds the card too, today: it does not record that
	// it was one.
	_, err = d.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{ref(work)})
	require.NoError(t, err)
	held, err = d.CardsInUse()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"0000:01:00.0": "dri-cdi.dev/i915"}, held, "the admin claim's device is still recorded")
	got, err = d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{other})
	require.NoError(t, err)
	require.ErrorContains(t, got["uid-other"].Err, "card is prepared for another claim ns/monitor (uid-monitor)")

	_, err = d.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{ref(monitor)})
	require.NoError(t, err)
	held, err = d.CardsInUse()
	require.NoError(t, err)
	require.Empty(t, held)
	got, err = d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{other})
	require.NoError(t, err)
	require.NoError(t, got["uid-other"].Err)
}
