package scenarios

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestForgedAnnotation gives containers the allocation annotation without
// an allocation. The NRI plugin must trust only the kubelet's PodResources
// API, so none of them may reach the device. Both containers see the host
// node through a hostPath: a wrongly added cgroup rule would turn their
// EPERM into ENXIO.
func TestForgedAnnotation(t *testing.T) {
	ctx := context.Background()
	card := harness.IntelGPU(0)
	cards := []drmtest.GPU{card}
	n := startNode(t, harness.NodeOptions{Name: "forged", GPUs: cards, Delivery: harness.DeliveryNRI, NRI: true, HideCDIFromRuntime: true})
	_, err := n.WaitAllocatable(ctx, resource, 1, 90*time.Second)
	require.NoError(t, err)
	key, value := alloc.Annotation(resource, []string{card.ID()})

	t.Run("pod annotation", func(t *testing.T) {
		res := probePod(t, n, harness.PodSpec{Name: "forged-pod", HostPathDRI: true, Annotations: map[string]string{key: value}}, harness.RenderPath(card))
		r := res[harness.RenderPath(card)]
		require.Equal(t, harness.EPERM, r.Errno, "open %s: %s", r.Path, r.Message)
		c, err := n.PodContainer(ctx, "forged-pod")
		require.NoError(t, err)
		spec, err := n.Inspect(ctx, c.ID)
		require.NoError(t, err)
		requireNoDRMDevice(t, spec)
	})

	t.Run("sibling container claims the allocated card through CRI", func(t *testing.T) {
		// A CRI client can set container annotations directly; they reach
		// the NRI plugin exactly like the kubelet's Allocate annotations.
		// The intruder joins a pod whose main container holds the card and
		// claims that card: authorization is per container, so it must get
		// nothing. It carries the kubelet's labels of that pod, or the
		// kubelet would remove it as an orphan before it ran.
		holder := harness.PodSpec{Name: "holder", Resources: map[string]int64{resource: 1}, Script: harness.ProbeAndWait(harness.RenderPath(card))}
		require.NoError(t, n.CreatePod(ctx, holder))
		out, err := n.WaitOutput(ctx, holder.Name, harness.ProbeDone, 120*time.Second)
		require.NoError(t, err)
		require.Equal(t, harness.ENXIO, parseProbes(t, out, harness.RenderPath(card))[harness.RenderPath(card)].Errno, "the holder must have the card")
		main, err := n.PodContainer(ctx, holder.Name)
		require.NoError(t, err)
		r, refused := probeIntruder(t, n, main.PodID, map[string]string{key: value}, filepath.Join(n.DevRoot, "dri"), "/dev/dri", harness.RenderPath(card))
		if refused {
			return
		}
		require.Equal(t, harness.EPERM, r.Errno, "open %s: %s", r.Path, r.Message)
	})
}
