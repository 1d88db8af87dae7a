package dra

import (
	"context"
	"testing"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// An entry is removed only after its claim was seen gone (NotFound, or a
// claim of that name with another UID) for the grace period; a claim
// that exists keeps its entry, and so does one whose GET fails with any
// other error, however long.
func TestOrphanedEntriesAreCollected(t *testing.T) {
	d := newDriver(t, t.TempDir())
	ctx := context.Background()
	live := allocated("live", "uid-live", result("gpu", "pci-0000-00-02-0"))
	gone := allocated("gone", "uid-gone", result("gpu", "pci-0000-01-00-0"))
	reused := allocated("reused", "uid-reused", result("gpu", "pci-0000-03-00-0"))
	mon := result("mon", "pci-0000-00-02-0")
	mon.AdminAccess = ptr.To(true)
	unreachable := allocated("unreachable", "uid-unreachable", mon)
	got, err := d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{live, gone, reused, unreachable})
	require.NoError(t, err)
	for _, r := range got {
		require.NoError(t, r.Err)
	}

	client := fake.NewClientset(k8sClaim(live), k8sClaim(allocated("reused", "uid-new", result("gpu", "pci-0000-03-00-0"))))
	client.PrependReactor("get", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == "unreachable" {
			return true, nil, apierrors.NewServiceUnavailable("etcd is down")
		}
		return false, nil, nil
	})
	d.opts.API = apiOf(client)
	now := time.Unix(1e9, 0)
	o := newOrphans()
	o.now = func() time.Time { return now }

	d.collectOnce(ctx, o) // first seen gone: kept
	require.Len(t, mustPrepared(t, d), 4)
	now = now.Add(o.grace - time.Second)
	d.collectOnce(ctx, o)
	require.Len(t, mustPrepared(t, d), 4, "not before the grace period")
	now = now.Add(time.Second)
	d.collectOnce(ctx, o)
	prepared := mustPrepared(t, d)
	require.Contains(t, prepared, "uid-live")
	require.Contains(t, prepared, "uid-unreachable", "an error is never taken for a missing claim")
	require.NotContains(t, prepared, "uid-gone")
	require.NotContains(t, prepared, "uid-reused", "a claim of that name with another UID is another claim")
	held, err := d.CardsInUse()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"0000:00:02.0": "dri-cdi.dev/i915"}, held)
	require.Empty(t, o.goneSince)

	// A claim that comes back before the grace period ends is kept.
	client2 := fake.NewClientset()
	d.opts.API = apiOf(client2)
	d.collectOnce(ctx, o)
	_, err = client2.ResourceV1().ResourceClaims("ns").Create(ctx, k8sClaim(live), metav1.CreateOptions{})
	require.NoError(t, err)
	now = now.Add(2 * o.grace)
	d.collectOnce(ctx, o)
	require.Contains(t, mustPrepared(t, d), "uid-live")
}

func mustPrepared(t *testing.T, d *Driver) map[string]PreparedClaim {
	t.Helper()
	p, err := d.Prepared()
	require.NoError(t, err)
	return p
}
