package scenarios

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestClusterHelm installs dri-cdi with `helm install` of the repository's
// chart on a real single-node cluster and serves the media-server
// Deployment through the scheduler; `helm uninstall` removes the release.
func TestClusterHelm(t *testing.T) {
	ctx := context.Background()
	gpu := harness.IntelGPU(0)
	c := startCluster(t, harness.ClusterOptions{Name: "helm", GPUs: []drmtest.GPU{gpu}})

	requireStep(t, "HelmInstallReady", func(t *testing.T) {
		out, err := c.HelmInstall(ctx, "dri-cdi")
		require.NoError(t, err, out)
		t.Logf("helm install:\n%s", out)
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, driCDIDaemonSet, 2*time.Minute))
		pod := mustOnePod(t, c, driCDINamespace, driCDIPods)
		for _, s := range pod.Status.ContainerStatuses {
			require.Equal(t, c.Image, s.Image, "container %s must run the chart's image", s.Name)
		}
	})

	requireStep(t, "AllocatableShowsResource", func(t *testing.T) {
		require.NoError(t, c.WaitAllocatable(ctx, resource, 1, 60*time.Second))
	})

	t.Run("MediaServerDeploymentGetsDevice", func(t *testing.T) {
		apply(t, c, harness.MediaServer("media", resource, 1))
		_, rep := mediaServer(t, c, "media")
		requireMediaServerOpens(t, rep)
		require.Equal(t, harness.RenderPath(gpu), rep.Node)
	})

	t.Run("HelmUninstall", func(t *testing.T) {
		out, err := c.Helm(ctx, "uninstall", "dri-cdi", "--namespace", driCDINamespace, "--wait")
		require.NoError(t, err, out)
		waitNoPods(t, c, driCDINamespace, driCDIPods, 2*time.Minute)
		_, err = c.Kubectl(ctx, "get", "daemonset", driCDIDaemonSet, "-n", driCDINamespace)
		require.Error(t, err, "the release's DaemonSet must be gone")
	})
}
