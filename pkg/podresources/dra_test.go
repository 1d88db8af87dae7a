package podresources_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/podresources"
	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
)

func TestContainerAllocation(t *testing.T) {
	gpu := podresources.ClaimDevice{
		Claim: "gpu-claim", Namespace: "default", Driver: "dri-cdi.dev", Pool: "node-a", Device: "pci-0000-00-02-0",
		CDIDevices: []string{"dri-cdi.dev/gpu=0000:00:02.0"},
	}
	nic := podresources.ClaimDevice{
		Claim: "gpu-claim", Namespace: "default", Driver: "nic.example.com", Pool: "node-a", Device: "eth1",
		CDIDevices: []string{"nic.example.com/nic=eth1"},
	}
	shared := podresources.ClaimDevice{
		Claim: "shared", Namespace: "default", Driver: "dri-cdi.dev", Pool: "node-a", Device: "pci-0000-03-00-0",
		CDIDevices: []string{"dri-cdi.dev/gpu=0000:03:00.0"},
	}
	tests := map[string]struct {
		getMode   podresourcestest.GetMode
		container string
		want      podresources.Allocation
		wantErr   error
	}{
		"devices and claims of one container": {
			container: "app",
			want: podresources.Allocation{
				Devices: map[string][]string{"dri-cdi.dev/i915": {"0000:00:02.0"}, "example.com/nic": {"eth1"}},
				Claims:  []podresources.ClaimDevice{gpu, nic, shared},
			},
		},
		"the same through List": {
			getMode:   podresourcestest.GetDisabled,
			container: "app",
			want: podresources.Allocation{
				Devices: map[string][]string{"dri-cdi.dev/i915": {"0000:00:02.0"}, "example.com/nic": {"eth1"}},
				Claims:  []podresources.ClaimDevice{gpu, nic, shared},
			},
		},
		"another container's claims are not this one's": {
			container: "sidecar",
			want:      podresources.Allocation{Devices: map[string][]string{}, Claims: []podresources.ClaimDevice{shared}},
		},
		"unknown container": {
			container: "nope",
			wantErr:   podresources.ErrContainerNotFound,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := startFake(t)
			s.SetGetMode(tc.getMode)
			s.SetClaims("default", "gpu", map[string][]podresources.ClaimDevice{
				"app":     {gpu, nic, shared},
				"sidecar": {shared},
			})
			c := newClient(t, s.Socket())
			got, err := c.ContainerAllocation(context.Background(), "default", "gpu", tc.container)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestContainerAllocationUnknownPod(t *testing.T) {
	s := startFake(t)
	c := newClient(t, s.Socket())
	_, err := c.ContainerAllocation(context.Background(), "default", "other", "app")
	require.ErrorIs(t, err, podresources.ErrPodNotFound)
}

// BenchmarkContainerAllocation is the query the NRI plugin makes for
// every container that asks for a card.
func BenchmarkContainerAllocation(b *testing.B) {
	benchQuery(b, func(ctx context.Context, c *podresources.Client) error {
		_, err := c.ContainerAllocation(ctx, "default", "gpu", "app")
		return err
	})
}

func TestNodeClaims(t *testing.T) {
	share := podresources.ClaimDevice{
		Claim: "share-a-gpu", Namespace: "media", Driver: "dri-cdi.dev", Pool: "node-a", Device: "pci-0000-00-02-0",
		CDIDevices: []string{"dri-cdi.dev/gpu=0000:00:02.0"}, ShareID: "7d9c2a1e-0b1c-4f3e-9a52-1f0e2d3c4b5a",
	}
	whole := podresources.ClaimDevice{
		Claim: "whole", Namespace: "default", Driver: "dri-cdi.dev", Pool: "node-a", Device: "pci-0000-03-00-0",
		CDIDevices: []string{"dri-cdi.dev/gpu=0000:03:00.0"},
	}
	s := startFake(t) // default/gpu: app and sidecar, device-plugin devices only
	s.SetPod("media", "plex", map[string]podresourcestest.Container{"plex": {}, "logs": {}})
	s.SetClaims("media", "plex", map[string][]podresources.ClaimDevice{"plex": {share}})
	s.SetClaims("default", "gpu", map[string][]podresources.ClaimDevice{"sidecar": {whole}})
	c := newClient(t, s.Socket())
	got, err := c.NodeClaims(context.Background())
	require.NoError(t, err)
	require.Equal(t, []podresources.ContainerClaims{
		{Namespace: "default", Pod: "gpu", Container: "sidecar", Claims: []podresources.ClaimDevice{whole}},
		{Namespace: "media", Pod: "plex", Container: "plex", Claims: []podresources.ClaimDevice{share}},
	}, got, "only containers with claims, each with its share ID")
	_, lists := s.Calls()
	require.Equal(t, int64(1), lists, "one List call")

	s.SetRateLimited(1)
	_, err = c.NodeClaims(context.Background())
	require.ErrorContains(t, err, "PodResources List via "+s.Socket())
}
