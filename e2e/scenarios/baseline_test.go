package scenarios

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestBaselineHostPathEPERM reproduces the bug dri-cdi fixes: a pod that
// mounts /dev/dri as a hostPath sees the render node but cannot open it,
// because nothing asked the runtime for the device and the device cgroup
// denies it.
func TestBaselineHostPathEPERM(t *testing.T) {
	card := harness.IntelGPU(0)
	n := startNode(t, harness.NodeOptions{Name: "baseline", GPUs: []drmtest.GPU{card}})

	res := probePod(t, n, harness.PodSpec{Name: "hostpath", HostPathDRI: true}, harness.RenderPath(card))
	r := res[harness.RenderPath(card)]
	require.Equal(t, harness.EPERM, r.Errno, "open %s through a hostPath: %s", r.Path, r.Message)

	c, err := n.PodContainer(context.Background(), "hostpath")
	require.NoError(t, err)
	spec, err := n.Inspect(context.Background(), c.ID)
	require.NoError(t, err)
	require.Empty(t, spec.DevicesAt(harness.RenderPath(card)), "a hostPath must not add a device to the spec")
	require.Empty(t, spec.AllowRules(226, int64(card.Render)), "a hostPath must not add a cgroup rule")
}
