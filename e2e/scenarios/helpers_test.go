package scenarios

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

const (
	// resource is the default pool of the fake i915 cards.
	resource = "dri-cdi.dev/i915"
	// cdiKind is the default CDI kind.
	cdiKind = "dri-cdi.dev/gpu"
	// drmMajor is the DRM character device major.
	drmMajor = 226
)

// probePod runs a pod that probes paths, waits for its output and returns
// the result for each path.
func probePod(t *testing.T, n *harness.Node, spec harness.PodSpec, paths ...string) map[string]harness.ProbeResult {
	t.Helper()
	ctx := context.Background()
	spec.Script = harness.ProbeAndWait(paths...)
	require.NoError(t, n.CreatePod(ctx, spec))
	out, err := n.WaitOutput(ctx, spec.Name, harness.ProbeDone, 120*time.Second)
	require.NoError(t, err)
	t.Logf("pod %s output:\n%s", spec.Name, out)
	return parseProbes(t, out, paths...)
}

func parseProbes(t *testing.T, out string, paths ...string) map[string]harness.ProbeResult {
	t.Helper()
	res := map[string]harness.ProbeResult{}
	for _, p := range paths {
		r, err := harness.ParseProbe(out, p)
		require.NoError(t, err)
		res[p] = r
	}
	return res
}

func renderPaths(cards []drmtest.GPU) []string {
	var ps []string
	for _, c := range cards {
		ps = append(ps, harness.RenderPath(c))
	}
	return ps
}

// gpuPod runs a pod that requests one GPU and probes every card's render
// node. It returns the card the kubelet allocated to it and the results.
func gpuPod(t *testing.T, n *harness.Node, spec harness.PodSpec, cards []drmtest.GPU) (drmtest.GPU, map[string]harness.ProbeResult) {
	t.Helper()
	spec.Resources = map[string]int64{resource: 1}
	res := probePod(t, n, spec, renderPaths(cards)...)
	card := allocatedCard(t, n, spec.Name, cards)
	return card, res
}

// allocatedCard asks PodResources which card the pod's container holds.
func allocatedCard(t *testing.T, n *harness.Node, pod string, cards []drmtest.GPU) drmtest.GPU {
	t.Helper()
	ids, err := n.Allocated(context.Background(), pod, resource)
	require.NoError(t, err)
	require.Len(t, ids, 1, "pod %s: allocated device IDs of %s", pod, resource)
	for _, c := range cards {
		if alloc.CardID(ids[0]) == c.ID() {
			return c
		}
	}
	t.Fatalf("pod %s was allocated %q, which is none of the fake cards", pod, ids[0])
	return drmtest.GPU{}
}

// requireGranted checks that the pod could reach exactly the allocated
// card: ENXIO (the cgroup allowed it) on its render node, and no other
// card's render node usable.
func requireGranted(t *testing.T, res map[string]harness.ProbeResult, granted drmtest.GPU, cards []drmtest.GPU) {
	t.Helper()
	r := res[harness.RenderPath(granted)]
	require.Equal(t, harness.ENXIO, r.Errno, "allocated card %s: open %s: %s", granted.ID(), r.Path, r.Message)
	for _, c := range cards {
		if c.ID() == granted.ID() {
			continue
		}
		o := res[harness.RenderPath(c)]
		require.NotContains(t, []string{harness.ENXIO, harness.Opened}, o.Errno, "card %s was not allocated, yet open %s gave %s", c.ID(), o.Path, o.Message)
	}
}

// requireSpecHasCard checks the container's OCI spec against the card's
// CDI spec: linux.devices holds exactly the card's device nodes (card,
// render, by-path links), none twice, and there is one allow rule per
// node entry, so nothing was injected twice and nothing is missing.
func requireSpecHasCard(t *testing.T, n *harness.Node, pod string, card drmtest.GPU) *harness.ContainerSpec {
	t.Helper()
	ctx := context.Background()
	c, err := n.PodContainer(ctx, pod)
	require.NoError(t, err)
	spec, err := n.Inspect(ctx, c.ID)
	require.NoError(t, err)

	want := map[string]string{}
	specs, err := harness.ReadCDISpecs(n.CDIDir)
	require.NoError(t, err)
	for _, f := range specs {
		for _, d := range f.Devices {
			if f.Kind != cdiKind || d.Name != card.ID() {
				continue
			}
			for _, dn := range d.ContainerEdits.DeviceNodes {
				want[dn.Path] = fmt.Sprintf("%d:%d", dn.Major, dn.Minor)
			}
		}
	}
	require.Contains(t, want, harness.RenderPath(card), "the CDI spec of %s must list its render node", card.ID())
	require.Contains(t, want, harness.CardPath(card), "the CDI spec of %s must list its card node", card.ID())

	have := map[string]string{}
	entries := map[string]int{}
	for _, d := range spec.Devices {
		if d.Major != drmMajor {
			continue
		}
		require.NotContains(t, have, d.Path, "linux.devices lists %s twice", d.Path)
		require.Equal(t, "c", d.Type, d.Path)
		have[d.Path] = fmt.Sprintf("%d:%d", d.Major, d.Minor)
		entries[have[d.Path]]++
	}
	require.Equal(t, want, have, "linux.devices must hold exactly the card's nodes")
	for mm, count := range entries {
		var major, minor int64
		_, err := fmt.Sscanf(mm, "%d:%d", &major, &minor)
		require.NoError(t, err)
		require.Len(t, spec.AllowRules(major, minor), count, "allow rules for c %s: one per device entry", mm)
	}
	return spec
}

// requireNoDRMDevice checks that the container's spec grants no DRM device.
func requireNoDRMDevice(t *testing.T, spec *harness.ContainerSpec) {
	t.Helper()
	for _, d := range spec.Devices {
		require.NotEqual(t, int64(drmMajor), d.Major, "linux.devices has DRM device %s", d.Path)
	}
	for _, r := range spec.Rules {
		if r.Allow && r.Major != nil && *r.Major == drmMajor {
			t.Fatalf("linux.resources.devices allows c %d:%v", drmMajor, ptrString(r.Minor))
		}
	}
}

func ptrString(p *int64) string {
	if p == nil {
		return "*"
	}
	return fmt.Sprint(*p)
}

func cdiName(card drmtest.GPU) string { return cdiKind + "=" + card.ID() }

func int64p(v int64) *int64 { return &v }
