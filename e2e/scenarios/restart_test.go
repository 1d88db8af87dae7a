package scenarios

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// restartCase checks what must survive a restart: a pod that held a GPU
// before keeps it (same container, still ENXIO, allocation still
// reported), and a new pod is admitted and gets the other GPU.
func restartCase(t *testing.T, name string, restart func(t *testing.T, n *harness.Node)) {
	ctx := context.Background()
	cards := []drmtest.GPU{harness.IntelGPU(0), harness.IntelGPU(1)}
	n := startNode(t, harness.NodeOptions{Name: name, GPUs: cards, Delivery: harness.DeliveryCDICRI, NRI: true})
	_, err := n.WaitAllocatable(ctx, resource, 2, 90*time.Second)
	require.NoError(t, err)

	first, res := gpuPod(t, n, harness.PodSpec{Name: "before"}, cards)
	requireGranted(t, res, first, cards)
	ctrBefore, err := n.PodContainer(ctx, "before")
	require.NoError(t, err)
	allocBefore, err := n.Allocated(ctx, "before", resource)
	require.NoError(t, err)

	restart(t, n)

	ctrAfter, err := n.PodContainer(ctx, "before")
	require.NoError(t, err)
	require.Equal(t, ctrBefore.ID, ctrAfter.ID, "the running pod's container must not be recreated")
	require.Equal(t, "CONTAINER_RUNNING", ctrAfter.State)
	out, err := n.Exec(ctx, ctrAfter.ID, "/bin/sh", "-c", harness.ProbeScript(harness.RenderPath(first)))
	require.NoError(t, err, out)
	again := parseProbes(t, out, harness.RenderPath(first))
	require.Equal(t, harness.ENXIO, again[harness.RenderPath(first)].Errno, "running pod after restart: %s", again[harness.RenderPath(first)].Message)
	allocAfter, err := n.Allocated(ctx, "before", resource)
	require.NoError(t, err)
	require.Equal(t, allocBefore, allocAfter, "the running pod's allocation must not be lost")

	second, res := gpuPod(t, n, harness.PodSpec{Name: "after"}, cards)
	require.NotEqual(t, first.ID(), second.ID(), "the new pod must not get the card that is still allocated")
	requireGranted(t, res, second, cards)
}

// TestKubeletRestart restarts the kubelet under a running GPU pod: the
// kubelet deletes every device-plugin socket on start, and the agent must
// register again.
func TestKubeletRestart(t *testing.T) {
	restartCase(t, "kubelet-restart", func(t *testing.T, n *harness.Node) {
		ctx := context.Background()
		require.NoError(t, n.RestartKubelet(ctx))
		// The registration counter restarts with the kubelet.
		require.NoError(t, n.WaitRegistrations(ctx, resource, 1, 90*time.Second))
	})
}

// TestAgentRestart kills the agent as a crash would and starts it again.
func TestAgentRestart(t *testing.T) {
	restartCase(t, "agent-restart", func(t *testing.T, n *harness.Node) {
		ctx := context.Background()
		before, err := n.Registrations(ctx, resource)
		require.NoError(t, err)
		require.Positive(t, before)
		n.KillAgent()
		require.False(t, n.AgentRunning())
		require.NoError(t, n.StartAgent(ctx, harness.DeliveryCDICRI))
		require.NoError(t, n.WaitRegistrations(ctx, resource, before+1, 90*time.Second))
	})
}

// TestContainerdRestart restarts containerd in nri mode, where only the
// NRI plugin can inject devices: containerd recreates its NRI socket, the
// plugin must reconnect, and the next pod must still get its GPU.
func TestContainerdRestart(t *testing.T) {
	ctx := context.Background()
	cards := []drmtest.GPU{harness.IntelGPU(0), harness.IntelGPU(1)}
	n := startNode(t, harness.NodeOptions{Name: "containerd-restart", GPUs: cards, Delivery: harness.DeliveryNRI, NRI: true, HideCDIFromRuntime: true})
	_, err := n.WaitAllocatable(ctx, resource, 2, 90*time.Second)
	require.NoError(t, err)

	first, res := gpuPod(t, n, harness.PodSpec{Name: "before"}, cards)
	requireGranted(t, res, first, cards)

	connected := n.NRIConnections()
	require.Positive(t, connected, "the NRI plugin never connected")
	require.NoError(t, n.RestartContainerd(ctx))
	require.NoError(t, n.WaitLog(ctx, 60*time.Second, connected+1, "containerd", "dri-cdi", "connected and synchronized"), "the NRI plugin must reconnect to the restarted containerd")
	require.True(t, n.NRIRunning(), "the NRI plugin must survive containerd's restart")

	second, res := gpuPod(t, n, harness.PodSpec{Name: "after"}, cards)
	require.NotEqual(t, first.ID(), second.ID())
	requireGranted(t, res, second, cards)
}
