package scenarios

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestNonRootNoSupplementalGroups runs the pod as uid 1000 without
// supplementalGroups. The host node is root-owned 0660, so only the
// device's ownership inside the container can let the process open it:
// the open must reach the driver (ENXIO), not fail with EACCES. Both
// delivery paths must give the same result.
func TestNonRootNoSupplementalGroups(t *testing.T) {
	for _, tc := range []struct {
		name     string
		delivery string
		hide     bool
	}{
		{name: "cdi-cri", delivery: harness.DeliveryCDICRI},
		{name: "nri", delivery: harness.DeliveryNRI, hide: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cards := []drmtest.GPU{harness.IntelGPU(0)}
			n := startNode(t, harness.NodeOptions{Name: "nonroot-" + tc.name, GPUs: cards, Delivery: tc.delivery, NRI: true, HideCDIFromRuntime: tc.hide})
			card, res := gpuPod(t, n, harness.PodSpec{Name: "gpu-uid1000", RunAsUser: int64p(1000), RunAsGroup: int64p(1000)}, cards)
			r := res[harness.RenderPath(card)]
			require.NotEqual(t, harness.EACCES, r.Errno, "uid 1000: %s", r.Message)
			requireGranted(t, res, card, cards)
		})
	}
}
