package scenarios

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestAgentRegistersWhileTheKubeletHoldsItsSocket puts the real kubelet
// in the state a Register it answered after the agent's deadline leaves:
// it holds the agent's socket as connected while the agent has to
// register again. A second Register of the agent's socket does that: the
// kubelet refuses it ("device plugin already connected"), keeps the
// endpoint, forgets the client it had for that socket (so that endpoint
// is never disconnected) and keeps the refused call's connection open.
// When the agent's socket then goes, the agent must register again, on a
// socket the kubelet takes, and no connection to its servers may be
// left but the kubelet's stream.
func TestAgentRegistersWhileTheKubeletHoldsItsSocket(t *testing.T) {
	ctx := context.Background()
	cards := []drmtest.GPU{harness.IntelGPU(0)}
	n := startNode(t, harness.NodeOptions{Name: "held-socket", GPUs: cards, Delivery: harness.DeliveryCDICRI, NRI: true})
	_, err := n.WaitAllocatable(ctx, resource, 1, 90*time.Second)
	require.NoError(t, err)
	registered := n.CountLog("agent", "registered with the kubelet")
	require.Positive(t, registered)

	sock := agentSocket(t)
	err = registerWithKubelet(ctx, filepath.Base(sock))
	require.ErrorContains(t, err, "device plugin already connected", "kubelet v1.37 refuses a socket path it holds")

	require.NoError(t, os.Remove(sock))
	require.NoError(t, n.WaitLog(ctx, 30*time.Second, registered+1, "agent", "registered with the kubelet"))
	require.NotEqual(t, sock, agentSocket(t), "the agent serves on a new socket")
	card, res := gpuPod(t, n, harness.PodSpec{Name: "after"}, cards)
	requireGranted(t, res, card, cards)
	require.Eventually(t, func() bool { return agentConnections(t) == 1 }, 30*time.Second, 100*time.Millisecond,
		"connections to the agent's sockets: only the kubelet's stream may be left")
}

// agentSocket returns the agent's only device plugin socket.
func agentSocket(t *testing.T) string {
	t.Helper()
	socks, err := filepath.Glob(filepath.Join(harness.DevicePluginDir, deviceplugin.SocketPrefix+"*.sock"))
	require.NoError(t, err)
	require.Len(t, socks, 1, "the agent's sockets")
	return socks[0]
}

// registerWithKubelet registers endpoint for resource as a device plugin
// would.
func registerWithKubelet(ctx context.Context, endpoint string) error {
	conn, err := grpc.NewClient("unix:"+filepath.Join(harness.DevicePluginDir, deviceplugin.KubeletSocketName),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: endpoint, ResourceName: resource,
	})
	return err
}

// agentConnections counts the connections accepted on the agent's
// sockets.
func agentConnections(t *testing.T) int {
	_, n, err := kubelettest.UnixSockets(filepath.Join(harness.DevicePluginDir, deviceplugin.SocketPrefix))
	require.NoError(t, err)
	return n
}
