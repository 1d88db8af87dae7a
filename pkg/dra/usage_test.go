package dra

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
	"github.com/dri-cdi/dri-cdi/pkg/usage"
)

// TestContainerClaims joins the kubelet's claims per container with the
// checkpoint: two media servers with one share each of a 2-share card are
// told apart by their claims and share IDs, each promised half the card;
// a whole card is promised whole; what is not this driver's, not this
// node's or not prepared is left out.
func TestContainerClaims(t *testing.T) {
	srv, err := podresourcestest.Start(filepath.Join(kubelettest.ShortDir(t), "kubelet.sock"))
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	client, err := podresources.New(srv.Socket())
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })

	d, err := NewDriver(Options{NodeName: node, Kind: cdi.DefaultKind, SysfsRoot: t.TempDir(),
		PluginDataDir: t.TempDir(), API: apiOf(fakeClient()), Log: testEntry(t), PodResources: client})
	require.NoError(t, err)
	require.NoError(t, d.Update(sharedPools(t, 2), nil))

	const igpu, amd = "pci-0000-00-02-0", "pci-0000-03-00-0"
	plexClaim := allocated("plex-0-gpu", "uid-plex", share("gpu", igpu, "share-1", 1))
	jellyClaim := allocated("jellyfin-0-gpu", "uid-jelly", share("gpu", igpu, "share-2", 0))
	wholeClaim := allocated("render-gpu", "uid-render", result("gpu", amd))
	monitor := allocated("monitor", "uid-monitor", result("gpu", igpu))
	monitor.Status.Allocation.Devices.Results[0].AdminAccess = ptr.To(true)
	res, err := d.PrepareResourceClaims(context.Background(), []*draapi.ResourceClaim{plexClaim, jellyClaim, wholeClaim, monitor})
	require.NoError(t, err)
	for uid, r := range res {
		require.NoError(t, r.Err, uid)
	}

	dev := func(claim, device, shareID string) podresources.ClaimDevice {
		return podresources.ClaimDevice{Claim: claim, Namespace: "ns", Driver: DriverName, Pool: node, Device: device, ShareID: shareID}
	}
	for _, pod := range []string{"plex-0", "jellyfin-0", "render-0", "monitor-0"} {
		srv.SetPod("ns", pod, map[string]podresourcestest.Container{"app": {}, "sidecar": {}})
	}
	srv.SetClaims("ns", "plex-0", map[string][]podresources.ClaimDevice{"app": {
		dev("plex-0-gpu", igpu, "share-1"),
		{Claim: "plex-0-gpu", Namespace: "ns", Driver: "nic.example.com", Pool: node, Device: "eth1"}, // another driver's
	}})
	srv.SetClaims("ns", "jellyfin-0", map[string][]podresources.ClaimDevice{
		"app":     {dev("jellyfin-0-gpu", igpu, "share-2"), dev("jellyfin-0-gpu", igpu, "share-2")}, // two requests, one allocation
		"sidecar": {dev("other-node", igpu, "share-9")},                                             // not prepared here
	})
	srv.SetClaims("ns", "render-0", map[string][]podresources.ClaimDevice{"app": {dev("render-gpu", amd, "")}})
	srv.SetClaims("ns", "monitor-0", map[string][]podresources.ClaimDevice{"app": {dev("monitor", igpu, "")}})

	got, err := d.ContainerClaims(context.Background())
	require.NoError(t, err)
	require.Equal(t, map[usage.Names][]usage.Claim{
		{Namespace: "ns", Pod: "plex-0", Container: "app"}: {
			{Card: "0000:00:02.0", Namespace: "ns", Name: "plex-0-gpu", ShareID: "share-1", Shares: 1, CardShares: 2}},
		{Namespace: "ns", Pod: "jellyfin-0", Container: "app"}: {
			{Card: "0000:00:02.0", Namespace: "ns", Name: "jellyfin-0-gpu", ShareID: "share-2", Shares: 1, CardShares: 2}},
		{Namespace: "ns", Pod: "render-0", Container: "app"}: {
			{Card: "0000:03:00.0", Namespace: "ns", Name: "render-gpu"}},
		{Namespace: "ns", Pod: "monitor-0", Container: "app"}: {
			{Card: "0000:00:02.0", Namespace: "ns", Name: "monitor", Admin: true}},
	}, got)
	for names, want := range map[usage.Names]float64{
		{Namespace: "ns", Pod: "plex-0", Container: "app"}:    0.5,
		{Namespace: "ns", Pod: "render-0", Container: "app"}:  1,
		{Namespace: "ns", Pod: "monitor-0", Container: "app"}: 0,
	} {
		r, ok := got[names][0].Promised()
		require.True(t, ok)
		require.Equal(t, want, r, names)
	}

	// A share with device memory (a card that publishes memory): its
	// amount, as prepare recorded it.
	_, err = d.claims.update(func(set *claimSet) {
		pc, _ := set.get("uid-jelly")
		pc.Devices = slices.Clone(pc.Devices)
		pc.Devices[0].Memory = 2 << 30
		set.add("uid-jelly", pc)
	})
	require.NoError(t, err)
	got, err = d.ContainerClaims(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(2<<30), got[usage.Names{Namespace: "ns", Pod: "jellyfin-0", Container: "app"}][0].Memory)

	// A claim of this driver in another node's pool is not this node's.
	srv.SetClaims("ns", "render-0", map[string][]podresources.ClaimDevice{"app": {
		{Claim: "render-gpu", Namespace: "ns", Driver: DriverName, Pool: "other-node", Device: amd}}})
	got, err = d.ContainerClaims(context.Background())
	require.NoError(t, err)
	require.NotContains(t, got, usage.Names{Namespace: "ns", Pod: "render-0", Container: "app"})

	// Unprepared, the share is no longer attributed.
	_, err = d.UnprepareResourceClaims(context.Background(), []ClaimRef{ref(plexClaim)})
	require.NoError(t, err)
	got, err = d.ContainerClaims(context.Background())
	require.NoError(t, err)
	require.NotContains(t, got, usage.Names{Namespace: "ns", Pod: "plex-0", Container: "app"})

	// The kubelet cannot be asked: an error, for the scan to keep its
	// last answer.
	srv.Stop()
	_, err = d.ContainerClaims(context.Background())
	require.ErrorContains(t, err, "PodResources List")
}

func TestContainerClaimsWithoutPodResources(t *testing.T) {
	d := newDriver(t, t.TempDir())
	_, err := d.ContainerClaims(context.Background())
	require.ErrorIs(t, err, errNoPodResources)
}
