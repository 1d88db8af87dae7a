package scenarios

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestFullSpecDir runs the agent with its spec dir on a 64 KiB tmpfs, on
// a real kubelet, containerd and runc, and fills it to the last byte
// while a card unbinds and another takes its numbers:
//
//  1. X and Y are listed Healthy with their specs;
//  2. the dir is full; X unbinds: its spec cannot be rewritten without
//     nodes, so the old one, naming X's numbers, is removed (removal still
//     works on a full filesystem): X's CDI name resolves to nothing, never
//     to numbers another card may take;
//  3. Y takes X's old numbers: Y's spec cannot be rewritten either, so it
//     goes too and Y is listed Unhealthy: nothing is advertised without a
//     valid spec, and the agent stays up;
//  4. space returns: the agent writes the specs by itself, Y is Healthy at
//     its new numbers, and a pod opens Y there.
func TestFullSpecDir(t *testing.T) {
	ctx := context.Background()
	x, y := harness.IntelGPU(0), harness.IntelGPU(1)
	n := startNode(t, harness.NodeOptions{Name: "full-specdir", GPUs: []drmtest.GPU{x, y},
		Delivery: harness.DeliveryCDICRI, NRI: true, SpecDirSize: "64k"})
	_, err := n.WaitAllocatable(ctx, resource, 2, 90*time.Second)
	require.NoError(t, err)
	require.NotEmpty(t, specNodes(t, n, x.ID()))

	// 2. Full; X unbinds.
	require.NoError(t, n.FillSpecDir())
	require.NoError(t, n.Tree.Unbind(x.ID()))
	require.NoError(t, n.WaitDeviceHealth(ctx, resource, x.ID(), pluginapi.Unhealthy, 60*time.Second))
	require.Eventually(t, func() bool { return !specDefines(t, n, x.ID()) }, 30*time.Second, 250*time.Millisecond,
		"X's spec, naming X's old numbers, must go when it cannot be rewritten")
	require.GreaterOrEqual(t, n.CountLog("agent", "removed a CDI spec that could not be updated", x.ID()), 1)

	// 3. Y takes X's old numbers; its spec cannot follow.
	require.NoError(t, n.Tree.Renumber(y.ID(), x.Card, x.Render))
	require.NoError(t, n.WaitDeviceHealth(ctx, resource, y.ID(), pluginapi.Unhealthy, 60*time.Second),
		"a card whose spec cannot be written must not be handed out")
	require.Eventually(t, func() bool { return !specDefines(t, n, y.ID()) }, 30*time.Second, 250*time.Millisecond)
	require.GreaterOrEqual(t, n.CountLog("agent", "no space left on device"), 1, "the agent must say why")
	require.True(t, n.AgentRunning(), "the agent stays up while the spec dir is full")

	// 4. Space returns: no restart, no event needed.
	require.NoError(t, n.FreeSpecDir())
	yNow := y.WithNodes(x.Card, x.Render)
	require.NoError(t, n.WaitDeviceHealth(ctx, resource, y.ID(), pluginapi.Healthy, 90*time.Second))
	require.Equal(t, fmt.Sprintf("%d:%d", drmMajor, x.Render), specNodes(t, n, y.ID())[harness.RenderPath(yNow)])
	got, res := gpuPodPaths(t, n, harness.PodSpec{Name: "after", Resources: map[string]int64{resource: 1}}, []drmtest.GPU{x, yNow}, renumberPaths)
	require.Equal(t, y.ID(), got.ID())
	require.Equal(t, harness.ENXIO, res[harness.RenderPath(yNow)].Errno, "the pod must reach Y at its new numbers")
}
