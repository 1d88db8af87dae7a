package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// A sample is the kubelet's sum growth over exactly one call.
func TestPrepareSample(t *testing.T) {
	for name, tc := range map[string]struct {
		sum0, n0, sum1, n1 float64
		want               time.Duration
		ok                 bool
	}{
		"one call":      {sum0: 0.5, n0: 10, sum1: 0.5021, n1: 11, want: 2100 * time.Microsecond, ok: true},
		"no call":       {sum0: 0.5, n0: 10, sum1: 0.5, n1: 10},
		"two calls":     {sum0: 0.5, n0: 10, sum1: 0.51, n1: 12},
		"kubelet reset": {sum0: 0.5, n0: 10, sum1: 0.001, n1: 1},
	} {
		t.Run(name, func(t *testing.T) {
			d, ok := oneSample(tc.sum0, tc.n0, tc.sum1, tc.n1)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.InDelta(t, tc.want, d, float64(time.Microsecond))
			}
		})
	}
}

// The schedule step's config puts the card with the shared PCI device ID,
// and only it, in the pool of shares; the step's other cards stay in the
// default exclusive i915 pool its exclusive template selects.
func TestSchedConfig(t *testing.T) {
	cfg, err := config.Parse([]byte(schedConfig(5)))
	require.NoError(t, err)
	card := func(id, device string, minor uint32) drm.Card {
		return drm.Card{ID: id, Driver: "i915", Bus: "pci", PCIAddress: id, VendorID: "8086", DeviceID: device,
			CardNode: drm.DeviceNode{Minor: minor}, RenderNode: &drm.DeviceNode{Minor: 128 + minor}}
	}
	shared := harness.IntelGPU(0)
	shared.Device = schedSharedDeviceID
	pools := cfg.Assign([]drm.Card{card("0000:00:02.0", shared.Device, 0), card("0000:00:03.0", harness.IntelGPU(1).Device, 1)})
	byResource := map[string]config.Pool{}
	for _, p := range pools {
		byResource[p.Resource] = p
	}
	require.Len(t, byResource[schedSharedPool].Cards, 1)
	require.Equal(t, "0000:00:02.0", byResource[schedSharedPool].Cards[0].ID)
	require.Equal(t, 5, byResource[schedSharedPool].Shares)
	require.Len(t, byResource[schedExclusivePool].Cards, 1)
	require.Equal(t, "0000:00:03.0", byResource[schedExclusivePool].Cards[0].ID)
	require.Zero(t, byResource[schedExclusivePool].Shares)
}
