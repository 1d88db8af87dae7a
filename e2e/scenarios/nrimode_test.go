package scenarios

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestNRIModeWithoutRuntimeCDI runs a runtime whose CDI cannot resolve our
// names (its cdi_spec_dirs do not hold our specs). In nri mode the NRI
// plugin alone injects the device; in cdi-cri mode the same runtime fails
// the pod with "unresolvable CDI devices".
func TestNRIModeWithoutRuntimeCDI(t *testing.T) {
	ctx := context.Background()
	cards := []drmtest.GPU{harness.IntelGPU(0)}
	n := startNode(t, harness.NodeOptions{Name: "nrimode", GPUs: cards, Delivery: harness.DeliveryNRI, NRI: true, HideCDIFromRuntime: true})

	t.Run("nri mode injects through NRI", func(t *testing.T) {
		card, res := gpuPod(t, n, harness.PodSpec{Name: "gpu-nri"}, cards)
		requireGranted(t, res, card, cards)
		spec := requireSpecHasCard(t, n, "gpu-nri", card)
		require.Empty(t, spec.CDIDevices, "nri mode must not hand CDI names to the runtime")
		runtimeSpecs, err := os.ReadDir(n.RuntimeCDIDir)
		require.NoError(t, err)
		require.Empty(t, runtimeSpecs, "the runtime's CDI dir must not hold our specs, or CDI could have injected the device")
	})

	t.Run("cdi-cri mode on the same runtime fails the pod", func(t *testing.T) {
		// The node has one card; free it.
		if err := n.DeletePod(ctx, "gpu-nri"); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		before, err := n.Registrations(ctx, resource)
		require.NoError(t, err)
		n.StopAgent()
		require.NoError(t, n.StartAgent(ctx, harness.DeliveryCDICRI))
		require.NoError(t, n.WaitRegistrations(ctx, resource, before+1, 90*time.Second))

		pod := harness.PodSpec{Name: "gpu-cdicri", Resources: map[string]int64{resource: 1}, Script: harness.ProbeAndWait(harness.RenderPath(cards[0]))}
		require.NoError(t, n.CreatePod(ctx, pod))
		st, err := n.WaitPod(ctx, pod.Name, 120*time.Second, func(s harness.PodStatus) bool {
			return strings.Contains(s.Describe(), "unresolvable CDI devices")
		})
		require.NoError(t, err)
		t.Logf("pod %s: %s", pod.Name, st.Describe())
		require.Contains(t, st.Describe(), cdiName(cards[0]))

		// dri-cdi doctor must explain it: the runtime's cdi_spec_dirs miss
		// our spec dir, so cdi-cri cannot work here and nri is the mode.
		rep, text, err := n.Doctor(ctx, harness.DeliveryCDICRI)
		require.NoError(t, err)
		t.Logf("dri-cdi doctor:\n%s", text)
		require.True(t, rep.Failed, "doctor must fail this node in cdi-cri mode")
		explained := false
		for _, f := range rep.Failures() {
			if strings.Contains(f.Message+f.Fix, "cdi_spec_dirs") && strings.Contains(f.Message+f.Fix, n.CDIDir) {
				explained = true
			}
		}
		require.True(t, explained, "a failed check must name cdi_spec_dirs and the spec dir %s", n.CDIDir)
		require.Equal(t, harness.DeliveryNRI, rep.Recommended)
	})
}
