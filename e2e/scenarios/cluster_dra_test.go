package scenarios

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

const (
	draDriver    = "dri-cdi.dev"
	draDaemonSet = "dri-cdi-dra"
	draPods      = "app.kubernetes.io/component=dra-node"
	draModeLabel = "dri-cdi.dev/mode"
)

// hybridAMD is the node's AMD card next to harness.IntelGPU(0): card1,
// renderD129, without /dev/kfd (the DRA DaemonSet mounts only /dev/dri).
func hybridAMD() drmtest.GPU { return amdWithoutKFD(1, 129) }

// amdWithoutKFD is an AMD card at cardN and renderDM without /dev/kfd
// (the DaemonSets mount only /dev/dri).
func amdWithoutKFD(card, render int) drmtest.GPU {
	g := drmtest.AMDdGPU.WithNodes(card, render)
	g.KFD = false
	return g
}

// TestClusterDRA runs dri-cdi as a DRA driver the way a user does, on the
// real single-node cluster of TestClusterKustomize with a hybrid node (one
// i915 and one amdgpu card): the node labelled dri-cdi.dev/mode=dra, the
// DRA overlay applied with `kubectl apply -k`, and workloads that ask for
// cards by ResourceClaim and by extended resource, placed by the
// scheduler. The subtests run in order on one cluster, each building on
// the state the previous one left.
func TestClusterDRA(t *testing.T) {
	ctx := context.Background()
	intel, amd := harness.IntelGPU(0), hybridAMD()
	c := startCluster(t, harness.ClusterOptions{Name: "dra", GPUs: []drmtest.GPU{intel, amd}})
	intelRender, amdRender := harness.RenderPath(intel), harness.RenderPath(amd)

	requireStep(t, "ControlPlaneServesDRA", func(t *testing.T) {
		require.NoError(t, c.RequireDRA(ctx))
	})

	requireStep(t, "LabelledNodeRunsTheDRADaemonSetOnly", func(t *testing.T) {
		require.NoError(t, c.LabelNode(ctx, draModeLabel, "dra"))
		overlay, err := c.WriteDRAOverlay(filepath.Join(c.Dir, "overlay-dra"))
		require.NoError(t, err)
		rendered, err := c.Kustomize(ctx, overlay)
		require.NoError(t, err)
		require.Contains(t, rendered, "image: "+c.Image, "the manifests must name the image `make image` built")
		kubectl(t, c, "apply", "-k", overlay)
		t.Cleanup(func() {
			if t.Failed() {
				logPodContainers(t, c, driCDINamespace, draPods)
			}
		})
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, draDaemonSet, 3*time.Minute))
		var ds struct{ harness.DaemonSetStatus }
		require.NoError(t, c.GetJSON(ctx, &ds, "daemonset", driCDIDaemonSet, "-n", driCDINamespace))
		require.Zero(t, ds.Status.DesiredNumberScheduled, "the device plugin must not run on a DRA node")
		pods, err := c.Pods(ctx, driCDINamespace, driCDIPods)
		require.NoError(t, err)
		require.Empty(t, pods, "no device-plugin pod on the DRA node")
		n, err := c.Allocatable(ctx, resource)
		require.NoError(t, err)
		require.Zero(t, n, "no device plugin advertises %s here", resource)
	})

	requireStep(t, "SliceListsBothCards", func(t *testing.T) {
		devs := waitSlice(t, c, 2)
		i, a := sliceDevice(t, devs, intel), sliceDevice(t, devs, amd)
		require.Equal(t, "i915", i.Attributes["driver"])
		require.Equal(t, "amdgpu", a.Attributes["driver"])
		require.Equal(t, "8086", i.Attributes["vendorID"])
		require.Equal(t, "1002", a.Attributes["vendorID"])
		require.Equal(t, intel.ID(), i.Attributes["resource.kubernetes.io/pciBusID"])
		require.Equal(t, "dri-cdi.dev/i915", i.Attributes["resource"])
		require.Equal(t, strconv.Itoa(intel.Render), i.Attributes["renderMinor"])
	})

	requireStep(t, "PluginPublishedTheNodesOneSlice", func(t *testing.T) {
		// The node had no slice: the plugin created one (allowed by the
		// overlay's RBAC and admission policy), named by its index and
		// owned by the Node, and wrote nothing else.
		pods, err := c.Pods(ctx, driCDINamespace, draPods)
		require.NoError(t, err)
		require.Len(t, pods, 1)
		logs, err := c.ContainerLogs(ctx, &pods[0], "dra")
		require.NoError(t, err)
		require.NotContains(t, logs, "cannot publish the node's ResourceSlice")
		var slices struct {
			Items []struct {
				Metadata struct {
					Name            string `json:"name"`
					OwnerReferences []struct {
						Kind string `json:"kind"`
						Name string `json:"name"`
					} `json:"ownerReferences"`
				} `json:"metadata"`
			} `json:"items"`
		}
		require.NoError(t, c.GetJSON(ctx, &slices, "resourceslices", "--field-selector", "spec.driver="+draDriver))
		require.Len(t, slices.Items, 1)
		require.True(t, strings.HasPrefix(slices.Items[0].Metadata.Name, "00000-"+draDriver+"-"+harness.NodeName+"-"), slices.Items[0].Metadata.Name)
		require.Len(t, slices.Items[0].Metadata.OwnerReferences, 1)
		require.Equal(t, "Node", slices.Items[0].Metadata.OwnerReferences[0].Kind)
		require.Equal(t, harness.NodeName, slices.Items[0].Metadata.OwnerReferences[0].Name)
		require.Contains(t, logs, `"msg":"ResourceSlice published"`)
	})

	var celClaim harness.Claim
	requireStep(t, "ClaimTemplateByCELGetsTheIntelCard", func(t *testing.T) {
		apply(t, c, harness.ResourceClaimTemplate("intel", harness.DRAClass, `device.attributes["dri-cdi.dev"].driver == "i915"`))
		apply(t, c, harness.ClaimPod("cel", harness.ClaimRef{Template: "intel"}, intelRender, amdRender))
		res := claimPodProbes(t, c, "cel", intelRender, amdRender)
		require.Equal(t, harness.ENXIO, res[intelRender].Errno, "the i915 card's render node: %s", res[intelRender].Message)
		require.Equal(t, harness.ENOENT, res[amdRender].Errno, "the amdgpu card is not the pod's: %s", res[amdRender].Message)
		celClaim = podClaim(t, c, "cel")
		require.Equal(t, []string{sliceDevice(t, waitSlice(t, c, 2), intel).Name}, celClaim.Devices())
		require.FileExists(t, filepath.Join(c.Node.DRAPluginDir(), "checkpoint.json"))
		requireCheckpointHas(t, c, celClaim.Metadata.UID, true)
	})

	t.Run("NRIPluginAuthorizesTheClaim", func(t *testing.T) {
		// containerd 2.4 passes the claim's CDI names to NRI; dri-cdi-nri
		// confirms them against the container's DynamicResources and
		// finds the nodes CDI injected: "verified", no error.
		m := nriMetrics(t, c)
		require.GreaterOrEqual(t, metricValue(t, m, "dri_cdi_nri_handler_duration_seconds_count", "result", "verified"), 1.0, m)
		require.Zero(t, metricValue(t, m, "dri_cdi_nri_handler_duration_seconds_count", "result", "error"), m)
	})

	requireStep(t, "ClaimDeletedWithItsPodIsUnprepared", func(t *testing.T) {
		kubectl(t, c, "delete", "pod", "cel", "--wait=true")
		require.Eventually(t, func() bool {
			claims, err := c.Claims(ctx, "default")
			if err != nil {
				return false
			}
			for _, cl := range claims {
				if cl.Metadata.UID == celClaim.Metadata.UID {
					return false
				}
			}
			return true
		}, 60*time.Second, time.Second, "the template's claim must be deleted with its pod")
		require.Eventually(t, func() bool { return !checkpointHas(t, c, celClaim.Metadata.UID) }, 60*time.Second, time.Second,
			"the plugin must unprepare the claim (its checkpoint still names %s)", celClaim.Metadata.UID)
	})

	var ext *harness.MediaReport
	requireStep(t, "ExtendedResourcePodIsServedByDRA", func(t *testing.T) {
		// The stock media-server Deployment of TestClusterKustomize,
		// unchanged: resources.limits dri-cdi.dev/i915: 1.
		apply(t, c, harness.MediaServer("ext", resource, 1))
		pod, rep := mediaServer(t, c, "ext")
		requireMediaServerOpens(t, rep)
		require.Equal(t, intelRender, rep.Node)
		names, err := c.PodClaimNames(ctx, "default", pod.Metadata.Name)
		require.NoError(t, err)
		require.Len(t, names, 1, "the scheduler must have made the pod's extended-resource claim")
		var cl harness.Claim
		require.NoError(t, c.GetJSON(ctx, &cl, "resourceclaim", names[0], "-n", "default"))
		require.Equal(t, []string{sliceDevice(t, waitSlice(t, c, 2), intel).Name}, cl.Devices())
		ext = rep
	})

	requireStep(t, "SharedClaimGivesTwoPodsTheSameCard", func(t *testing.T) {
		apply(t, c, harness.ResourceClaim("shared", harness.DRAClass, `device.attributes["dri-cdi.dev"].driver == "amdgpu"`))
		for _, p := range []string{"share-a", "share-b"} {
			apply(t, c, harness.ClaimPod(p, harness.ClaimRef{Claim: "shared"}, amdRender, intelRender))
		}
		for _, p := range []string{"share-a", "share-b"} {
			res := claimPodProbes(t, c, p, amdRender, intelRender)
			require.Equal(t, harness.ENXIO, res[amdRender].Errno, "%s: the shared amdgpu card: %s", p, res[amdRender].Message)
			require.Equal(t, harness.ENOENT, res[intelRender].Errno, "%s: the i915 card is the ext pod's", p)
		}
		var cl harness.Claim
		require.NoError(t, c.GetJSON(ctx, &cl, "resourceclaim", "shared", "-n", "default"))
		require.Equal(t, []string{sliceDevice(t, waitSlice(t, c, 2), amd).Name}, cl.Devices())
		var users []string
		for _, r := range cl.Status.ReservedFor {
			users = append(users, r.Name)
		}
		require.ElementsMatch(t, []string{"share-a", "share-b"}, users)
	})

	requireStep(t, "PluginRestartKeepsRunningPodsAndServesNewOnes", func(t *testing.T) {
		before := mustOnePod(t, c, "default", "app=ext")
		id := before.ContainerID("server")
		plugin := mustOnePod(t, c, driCDINamespace, draPods)
		kubectl(t, c, "delete", "pod", "-n", driCDINamespace, plugin.Metadata.Name, "--wait=true")
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, draDaemonSet, 3*time.Minute))
		require.NotEqual(t, plugin.Metadata.UID, mustOnePod(t, c, driCDINamespace, draPods).Metadata.UID)

		after := mustOnePod(t, c, "default", "app=ext")
		require.Equal(t, before.Metadata.UID, after.Metadata.UID, "the GPU pod must keep running")
		require.Equal(t, id, after.ContainerID("server"), "the GPU container must not be restarted")
		r := probeRunning(t, c, id, ext.Node)
		require.Equal(t, harness.ENXIO, r.Errno, "the running pod must keep its device: %s", r.Message)

		// A new pod on the claim prepared before the restart, and a new
		// claim: the new plugin serves both.
		apply(t, c, harness.ClaimPod("share-c", harness.ClaimRef{Claim: "shared"}, amdRender))
		res := claimPodProbes(t, c, "share-c", amdRender)
		require.Equal(t, harness.ENXIO, res[amdRender].Errno, res[amdRender].Message)
		kubectl(t, c, "delete", "deployment", "ext", "--wait=true")
		waitNoPods(t, c, "default", "app=ext", 60*time.Second)
		apply(t, c, harness.ClaimPod("cel-after", harness.ClaimRef{Template: "intel"}, intelRender))
		res = claimPodProbes(t, c, "cel-after", intelRender)
		require.Equal(t, harness.ENXIO, res[intelRender].Errno, res[intelRender].Message)
	})

	t.Run("UnboundCardStaysTaintedAcrossPluginRestart", func(t *testing.T) {
		// share-a, -b and -c hold the shared claim on the amdgpu card.
		holder := mustOnePod(t, c, "default", "app=share-a")
		id := holder.ContainerID("app")
		require.NoError(t, c.Node.Tree.Unbind(amd.ID()))
		t.Cleanup(func() { _ = c.Node.Tree.Rebind(amd.ID()) }) // bound again below unless a step failed
		plugin := mustOnePod(t, c, driCDINamespace, draPods)
		kubectl(t, c, "delete", "pod", "-n", driCDINamespace, plugin.Metadata.Name, "--wait=true")
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, draDaemonSet, 3*time.Minute))
		require.NotEqual(t, plugin.Metadata.UID, mustOnePod(t, c, driCDINamespace, draPods).Metadata.UID)

		// The new plugin's first pass (done before it is Ready) kept the
		// held card: its spec keeps the name without a device node, and
		// the new process publishes it Unhealthy.
		require.True(t, specDefines(t, c.Node, amd.ID()), "the held card's CDI name must keep resolving")
		require.Empty(t, specNodes(t, c.Node, amd.ID()), "to no device node: its numbers may be another card's")
		m := loopbackMetrics(t, c, draMetricsPort)
		require.Equal(t, 1.0, metricValue(t, m, "dri_cdi_dra_devices", "health", "unhealthy"), m)
		require.Eventually(t, func() bool {
			devs, err := c.ResourceSliceDevices(ctx, draDriver)
			return err == nil && len(devs) == 2 && slices.Equal(sliceDevice(t, devs, amd).Taints, []string{draDriver + "/unavailable:NoSchedule"})
		}, 60*time.Second, 250*time.Millisecond, "the held card must stay in the slice, tainted")
		require.Equal(t, id, mustOnePod(t, c, "default", "app=share-a").ContainerID("app"), "the holder keeps running")

		require.NoError(t, c.Node.Tree.Rebind(amd.ID()))
		require.Eventually(t, func() bool {
			devs, err := c.ResourceSliceDevices(ctx, draDriver)
			return err == nil && len(devs) == 2 && len(sliceDevice(t, devs, amd).Taints) == 0
		}, 60*time.Second, 250*time.Millisecond, "bound again, the card must be untainted")
		require.Equal(t, fmt.Sprintf("%d:%d", drmMajor, amd.Render), specNodes(t, c.Node, amd.ID())[amdRender], "its own render node")
	})

	t.Run("HotplugShowsInTheSlice", func(t *testing.T) {
		hot := harness.IntelGPU(2)
		require.NoError(t, c.Node.Tree.Add(hot))
		sliceDevice(t, waitSlice(t, c, 3), hot)
		require.NoError(t, c.Node.Tree.Remove(hot.ID()))
		devs := waitSlice(t, c, 2)
		for _, d := range devs {
			require.NotEqual(t, hot.ID(), d.Attributes["id"], "the removed card must leave the slice")
		}
	})

	t.Run("CDIAnnotationWithoutClaimGetsNothing", func(t *testing.T) {
		// A pod that asks for no claim but names the amdgpu card's CDI
		// device (shared by share-a, -b, -c) in a cdi.k8s.io annotation.
		apply(t, c, harness.AnnotatedPod("forged", cdiName(amd), amdRender))
		res := claimPodProbes(t, c, "forged", amdRender)
		require.Equal(t, harness.ENOENT, res[amdRender].Errno, "a pod without a claim must not get the card: %s", res[amdRender].Message)
		kubectl(t, c, "delete", "pod", "forged", "--wait=true")
	})

	t.Run("DoctorSeesOneMode", func(t *testing.T) {
		rep, text, err := c.Node.Doctor(ctx, harness.DeliveryCDICRI)
		require.NoError(t, err)
		var found bool
		for _, r := range rep.Results {
			if r.Name == "dra.one-mode" {
				found = true
				require.Equal(t, "OK", r.Status, "%s\n%s", r.Message, text)
				require.Contains(t, r.Message, "DRA driver dri-cdi.dev registered")
			}
		}
		require.True(t, found, "no dra.one-mode check in\n%s", text)
	})
}

// Metrics ports of the DRA pod's containers (the manifests' defaults).
const (
	draMetricsPort = 9472
	nriMetricsPort = 9471
)
