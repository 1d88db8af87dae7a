package scenarios

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestDeviceSpecsByPath runs device-specs delivery (no CDI names, no NRI)
// on the real runtime: Allocate hands out every node by the card's
// /dev/dri/by-path link, and containerd resolves the link, so the pod
// gets its card's nodes (ENXIO). Then the renumbering: X unbinds, Y takes
// X's numbers, and the kubelet restarts the pod's container from its
// checkpointed DeviceSpecs: X's link is gone, so containerd fails the
// container instead of handing it Y's /dev/dri/cardN.
func TestDeviceSpecsByPath(t *testing.T) {
	ctx := context.Background()
	cards := []drmtest.GPU{harness.IntelGPU(0), harness.IntelGPU(1)}
	n := startNode(t, harness.NodeOptions{Name: "device-specs", GPUs: cards, Delivery: harness.DeliveryDeviceSpecs})
	_, err := n.WaitAllocatable(ctx, resource, 2, 90*time.Second)
	require.NoError(t, err)

	paths := []string{"/dev/dri/renderD128", "/dev/dri/renderD129"}
	holder := harness.PodSpec{Name: "holder", RestartPolicy: "Always", Resources: map[string]int64{resource: 1},
		Script: harness.ProbeAndWait(paths...)}
	require.NoError(t, n.CreatePod(ctx, holder))
	out, err := n.WaitOutput(ctx, holder.Name, harness.ProbeDone, 120*time.Second)
	require.NoError(t, err)
	t.Logf("holder output:\n%s", out)
	x := allocatedCard(t, n, holder.Name, cards)
	y := cards[0]
	if y.ID() == x.ID() {
		y = cards[1]
	}
	requireGranted(t, parseProbes(t, out, paths...), x, cards)
	first, err := n.PodContainer(ctx, holder.Name)
	require.NoError(t, err)
	spec, err := n.Inspect(ctx, first.ID)
	require.NoError(t, err)
	require.Empty(t, spec.CDIDevices, "device-specs hands out no CDI names")
	for _, p := range []string{harness.CardPath(x), harness.RenderPath(x), "/dev/dri/by-path/pci-" + x.ID() + "-render"} {
		devs := spec.DevicesAt(p)
		require.Len(t, devs, 1, "linux.devices at %s", p)
		want := int64(x.Card)
		if strings.Contains(p, "render") {
			want = int64(x.Render)
		}
		require.Equal(t, want, devs[0].Minor, "containerd resolved the by-path host path of %s", p)
	}

	// X unbinds, Y takes X's numbers, the container restarts.
	require.NoError(t, n.Tree.Unbind(x.ID()))
	require.NoError(t, n.WaitDeviceHealth(ctx, resource, x.ID(), pluginapi.Unhealthy, 60*time.Second))
	require.NoError(t, n.Tree.Renumber(y.ID(), x.Card, x.Render))
	require.NoError(t, n.WaitDeviceHealth(ctx, resource, y.ID(), pluginapi.Healthy, 60*time.Second))
	require.NoError(t, n.StopContainer(ctx, first.ID))
	st, err := n.WaitPod(ctx, holder.Name, 90*time.Second, harness.WaitingWith("by-path/pci-"+x.ID()))
	require.NoError(t, err, "the restarted container must fail on X's missing by-path link")
	t.Logf("holder after the restart: %s", st.Describe())
	requireNoContainerHolds(t, n, holder.Name, first.ID, x.Render)
}
