package scenarios

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// sharesConfig is the user's config of TestClusterDRAShares: the i915
// pool shares each card between two claims.
const sharesConfig = `pools:
- resource: dri-cdi.dev/i915
  drivers: [i915]
  shares: 2
`

// sharesTemplates are the recipe's ResourceClaimTemplates.
const sharesTemplates = "deployments/kustomize/examples/dra-shares/claim-templates.yaml"

// requireUnschedulable waits until the scheduler reports pod (label
// app=pod) Unschedulable, with a message that holds want.
func requireUnschedulable(t *testing.T, c *harness.Cluster, pod, want string) {
	t.Helper()
	p, err := c.WaitPod(context.Background(), "default", "app="+pod, 60*time.Second, func(p *harness.Pod) bool {
		status, reason, _ := p.Condition("PodScheduled")
		return status == "False" && reason == "Unschedulable"
	})
	require.NoError(t, err)
	_, _, msg := p.Condition("PodScheduled")
	t.Logf("scheduler on %s: %s", pod, msg)
	require.Contains(t, msg, want)
	require.Equal(t, "Pending", p.Status.Phase)
}

// applyDRAOverlay labels the node for DRA, applies the e2e DRA overlay
// with opts and waits for the DRA DaemonSet; a failed test logs its
// pod's containers.
func applyDRAOverlay(t *testing.T, c *harness.Cluster, opts harness.OverlayOptions) {
	t.Helper()
	applyDRAOverlayVia(t, c, opts, nil)
}

// applyDRAOverlayVia is applyDRAOverlay with the overlay layered, when
// layer is set, under another kustomization (a component) that layer
// writes over it and returns.
func applyDRAOverlayVia(t *testing.T, c *harness.Cluster, opts harness.OverlayOptions, layer func(overlay string) string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.RequireDRA(ctx))
	require.NoError(t, c.LabelNode(ctx, draModeLabel, "dra"))
	overlay, err := c.WriteDRAOverlayWith(filepath.Join(c.Dir, "overlay-dra"), opts)
	require.NoError(t, err)
	if layer != nil {
		overlay = layer(overlay)
	}
	kubectl(t, c, "apply", "-k", overlay)
	t.Cleanup(func() {
		if t.Failed() {
			logPodContainers(t, c, driCDINamespace, draPods)
		}
	})
	require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, draDaemonSet, 3*time.Minute))
}

// TestClusterDRAShares shares one card between claims through DRA
// consumable capacity, on the real single-node cluster: a pool with
// `shares: 2` publishes its card shareable, the scheduler places two
// one-share claims on it and keeps a third Pending until one goes, and
// the plugin prepares each share (and keeps them across its restart).
// The subtests run in order on one cluster.
func TestClusterDRAShares(t *testing.T) {
	ctx := context.Background()
	intel := harness.IntelGPU(0)
	c := startCluster(t, harness.ClusterOptions{Name: "shares", GPUs: []drmtest.GPU{intel}})
	render := harness.RenderPath(intel)

	requireStep(t, "DRAOverlayWithASharedPool", func(t *testing.T) {
		applyDRAOverlay(t, c, harness.OverlayOptions{Config: sharesConfig})
	})

	requireStep(t, "SliceListsTheCardOnceShareable", func(t *testing.T) {
		d := sliceDevice(t, waitSlice(t, c, 1), intel)
		require.True(t, d.AllowMultipleAllocations, "the API server must keep allowMultipleAllocations")
		require.Equal(t, map[string]string{"shares": "2"}, d.Capacity)
	})

	var shareA, shareB harness.Claim
	requireStep(t, "TwoPodsEachTakeOneShareOfTheCard", func(t *testing.T) {
		// The recipe's templates, as a user applies them in the apps'
		// namespace.
		root, err := harness.RepoRoot()
		require.NoError(t, err)
		kubectl(t, c, "apply", "-n", "default", "-f", filepath.Join(root, sharesTemplates))
		for _, p := range []string{"share-a", "share-b"} {
			apply(t, c, harness.ClaimPod(p, harness.ClaimRef{Template: "gpu-share"}, render))
		}
		for _, p := range []string{"share-a", "share-b"} {
			res := claimPodProbes(t, c, p, render)
			require.Equal(t, harness.ENXIO, res[render].Errno, "%s opens the shared card: %s", p, res[render].Message)
		}
		shareA, shareB = podClaim(t, c, "share-a"), podClaim(t, c, "share-b")
		device := sliceDevice(t, waitSlice(t, c, 1), intel).Name
		for _, cl := range []harness.Claim{shareA, shareB} {
			require.Equal(t, []string{device}, cl.Devices(), "both claims hold the one card")
			r := cl.Status.Allocation.Devices.Results[0]
			require.NotEmpty(t, r.ShareID, "a share of a shared device has a share ID")
			require.Equal(t, map[string]string{"shares": "1"}, r.ConsumedCapacity, "a claim that names no amount takes one share")
			requireCheckpointHas(t, c, cl.Metadata.UID, true)
		}
		require.NotEqual(t, shareA.Status.Allocation.Devices.Results[0].ShareID, shareB.Status.Allocation.Devices.Results[0].ShareID)
	})

	requireStep(t, "ThirdClaimWaitsForAFreeShare", func(t *testing.T) {
		apply(t, c, harness.ClaimPod("share-c", harness.ClaimRef{Template: "gpu-share"}, render))
		requireUnschedulable(t, c, "share-c", "cannot allocate all claims")

		kubectl(t, c, "delete", "pod", "share-a", "--wait=true")
		res := claimPodProbes(t, c, "share-c", render)
		require.Equal(t, harness.ENXIO, res[render].Errno, "share-c gets the share share-a left: %s", res[render].Message)
		require.Eventually(t, func() bool { return !checkpointHas(t, c, shareA.Metadata.UID) }, 60*time.Second, time.Second,
			"share-a's claim must be unprepared, and only it")
		requireCheckpointHas(t, c, shareB.Metadata.UID, true)
	})

	requireStep(t, "PluginRestartKeepsEveryShare", func(t *testing.T) {
		holders := map[string]string{}
		for _, p := range []string{"share-b", "share-c"} {
			holders[p] = mustOnePod(t, c, "default", "app="+p).ContainerID("app")
		}
		shareC := podClaim(t, c, "share-c")
		plugin := mustOnePod(t, c, driCDINamespace, draPods)
		kubectl(t, c, "delete", "pod", "-n", driCDINamespace, plugin.Metadata.Name, "--wait=true")
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, draDaemonSet, 3*time.Minute))
		for p, id := range holders {
			require.Equal(t, id, mustOnePod(t, c, "default", "app="+p).ContainerID("app"), "%s keeps running", p)
			r := probeRunning(t, c, id, render)
			require.Equal(t, harness.ENXIO, r.Errno, "%s keeps its share: %s", p, r.Message)
		}
		requireCheckpointHas(t, c, shareB.Metadata.UID, true)
		requireCheckpointHas(t, c, shareC.Metadata.UID, true)
	})

	requireStep(t, "WholeCardWaitsForEveryShare", func(t *testing.T) {
		apply(t, c, harness.ClaimPod("whole", harness.ClaimRef{Template: "gpu-whole"}, render))
		requireUnschedulable(t, c, "whole", "cannot allocate all claims")
		for _, p := range []string{"share-b", "share-c"} {
			kubectl(t, c, "delete", "pod", p, "--wait=true")
		}
		res := claimPodProbes(t, c, "whole", render)
		require.Equal(t, harness.ENXIO, res[render].Errno, "whole: %s", res[render].Message)
		r := podClaim(t, c, "whole").Status.Allocation.Devices.Results[0]
		require.Equal(t, map[string]string{"shares": "2"}, r.ConsumedCapacity, "the whole card is both shares")

		apply(t, c, harness.ClaimPod("share-d", harness.ClaimRef{Template: "gpu-share"}, render))
		requireUnschedulable(t, c, "share-d", "cannot allocate all claims")
		kubectl(t, c, "delete", "pod", "whole", "--wait=true")
		res = claimPodProbes(t, c, "share-d", render)
		require.Equal(t, harness.ENXIO, res[render].Errno, "share-d: %s", res[render].Message)
		kubectl(t, c, "delete", "pod", "share-d", "--wait=true")
	})

	requireStep(t, "ExtendedResourceAskingForTwoNeedsTwoCards", func(t *testing.T) {
		// dri-cdi.dev/i915: 2 through the DeviceClass's
		// extendedResourceName: the scheduler's claim asks for two devices
		// of the class, and a shared card is one device, so two shares of
		// one card do not count as two.
		apply(t, c, harness.GPUPod("two", resource, 2))
		requireUnschedulable(t, c, "two", "cannot allocate all claims")

		// A second card makes it schedulable: one share of each.
		second := harness.IntelGPU(1)
		require.NoError(t, c.Node.Tree.Add(second))
		t.Cleanup(func() { _ = c.Node.Tree.Remove(second.ID()) })
		devs := waitSlice(t, c, 2)
		_, err := c.WaitPod(ctx, "default", "app=two", 2*time.Minute, func(p *harness.Pod) bool { return p.Status.Phase == "Running" })
		require.NoError(t, err)
		names, err := c.PodClaimNames(ctx, "default", "two")
		require.NoError(t, err)
		require.Len(t, names, 1)
		var cl harness.Claim
		require.NoError(t, c.GetJSON(ctx, &cl, "resourceclaim", names[0], "-n", "default"))
		require.ElementsMatch(t, []string{sliceDevice(t, devs, intel).Name, sliceDevice(t, devs, second).Name}, cl.Devices())
		for _, r := range cl.Status.Allocation.Devices.Results {
			require.NotEmpty(t, r.ShareID)
			require.Equal(t, map[string]string{"shares": "1"}, r.ConsumedCapacity)
		}
		kubectl(t, c, "delete", "pod", "two", "--wait=true")
	})
}
