package scenarios

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestCDICRIModeENXIO is the fix in the default mode: the agent answers
// Allocate with the card's CDI name, containerd's CDI injects the nodes
// and the cgroup rules, and the NRI plugin, which also sees the
// container, adds nothing twice.
func TestCDICRIModeENXIO(t *testing.T) {
	cards := []drmtest.GPU{harness.IntelGPU(0)}
	n := startNode(t, harness.NodeOptions{Name: "cdicri", GPUs: cards, Delivery: harness.DeliveryCDICRI, NRI: true})

	card, res := gpuPod(t, n, harness.PodSpec{Name: "gpu"}, cards)
	requireGranted(t, res, card, cards)

	spec := requireSpecHasCard(t, n, "gpu", card)
	require.Contains(t, spec.CDIDevices, cdiName(card), "the kubelet must pass the card's CDI name to the runtime")
	require.Positive(t, n.NRIConnections(), "the NRI plugin must be connected, or 'nothing added twice' proves nothing")

	// On a node where cdi-cri works, dri-cdi doctor finds nothing to fail.
	rep, text, err := n.Doctor(context.Background(), harness.DeliveryCDICRI)
	require.NoError(t, err)
	require.False(t, rep.Failed, "dri-cdi doctor on a working cdi-cri node:\n%s", text)
}
