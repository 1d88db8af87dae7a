package dra

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "k8s.io/kubelet/pkg/apis/dra-health/v1"
	healthpbv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
)

// The socket names: the kubeletplugin helper's, so that doctor and an
// update from a version that used it find the same files.
func TestSocketNames(t *testing.T) {
	require.Equal(t, "dra.sock", draSocket(""))
	uid := "0f4a7c2e-9a40-4d0e-8f0a-3c1b2a4d5e6f"
	require.Equal(t, DriverName+"-"+uid+"-reg.sock", registrationSocket(config.DRARegistrarDir, uid))
	require.Equal(t, "dra-"+uid+".sock", draSocket(uid))
	// A registrar dir so deep that the full name does not fit a socket
	// address gets the hashed forms, still unique per pod.
	deep := "/" + strings.Repeat("d", 40)
	a, b := registrationSocket(deep, uid), registrationSocket(deep, uid+"x")
	require.LessOrEqual(t, len(filepath.Join(deep, a)), unixPathMax)
	require.NotEqual(t, a, b)
	require.True(t, strings.HasSuffix(a, "-reg.sock"), a)
}

func dialDRA(t *testing.T, e *env) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+e.plugin.Info.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// The kubelet learns every service of the DRA socket from GetInfo, and
// an older kubelet's v1beta1 calls reach the same prepare.
func TestServesV1beta1AndHealth(t *testing.T) {
	e := start(t, kubelettest.ShortDir(t), kubelettest.ShortDir(t), fakeClient(), "", testPools(), map[string]bool{"0000:03:00.0": true})
	require.Equal(t, []string{"v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"}, e.plugin.Info.SupportedVersions)
	require.Equal(t, DriverName, e.plugin.Info.Name)

	e.claim("old", "uid-old", result("gpu", "pci-0000-01-00-0"))
	old := drapbv1beta1.NewDRAPluginClient(dialDRA(t, e))
	resp, err := old.NodePrepareResources(context.Background(), &drapbv1beta1.NodePrepareResourcesRequest{
		Claims: []*drapbv1beta1.Claim{{Namespace: "ns", Name: "old", Uid: "uid-old"}}})
	require.NoError(t, err)
	require.Empty(t, resp.Claims["uid-old"].Error)
	require.Equal(t, []string{"dri-cdi.dev/gpu=0000:01:00.0"}, resp.Claims["uid-old"].Devices[0].CdiDeviceIds)
	un, err := old.NodeUnprepareResources(context.Background(), &drapbv1beta1.NodeUnprepareResourcesRequest{
		Claims: []*drapbv1beta1.Claim{{Namespace: "ns", Name: "old", Uid: "uid-old"}}})
	require.NoError(t, err)
	require.Empty(t, un.Claims["uid-old"].Error)
	require.Empty(t, e.preparedUIDs())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := healthpb.NewDRAResourceHealthClient(dialDRA(t, e)).NodeWatchResources(ctx, &healthpb.NodeWatchResourcesRequest{})
	require.NoError(t, err)
	report, err := stream.Recv()
	require.NoError(t, err)
	health := map[string]healthpb.HealthStatus{}
	for _, d := range report.Devices {
		require.Equal(t, node, d.Device.PoolName)
		health[d.Device.DeviceName] = d.Health
	}
	require.Equal(t, map[string]healthpb.HealthStatus{"pci-0000-00-02-0": healthpb.HealthStatus_HEALTHY,
		"pci-0000-01-00-0": healthpb.HealthStatus_HEALTHY, "pci-0000-03-00-0": healthpb.HealthStatus_UNHEALTHY}, health)

	alpha, err := healthpbv1alpha1.NewDRAResourceHealthClient(dialDRA(t, e)).NodeWatchResources(ctx, &healthpbv1alpha1.NodeWatchResourcesRequest{})
	require.NoError(t, err)
	areport, err := alpha.Recv()
	require.NoError(t, err)
	require.Len(t, areport.Devices, 3)

	// A stop ends the open health streams, so that the servers stop
	// gracefully: the kubelet sees the stream's end, not a connection cut
	// when the graceful stop ran out of time.
	e.close()
	for {
		if _, err = stream.Recv(); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, io.EOF)
}
