package scenarios

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// npuResource is the default pool of the fake Intel NPU (intel_vpu).
const npuResource = "dri-cdi.dev/intel_vpu"

// companionConfig gives the i915 pool (the default pool's name) a V4L2
// companion tied to the card and the DMA heaps; the NPU keeps its default
// pool.
const companionConfig = `pools:
- resource: dri-cdi.dev/i915
  drivers: [i915]
  companions:
  - subsystem: video4linux
  - path: /dev/dma_heap/*
`

// Container paths of the i915 pool's companions.
const (
	video = "/dev/video10"
	heap  = "/dev/dma_heap/system"
)

// npuClass is the DRA DeviceClass of the intel_vpu driver
// (deployments/kustomize/overlays/dra/deviceclasses.yaml).
const npuClass = "intel-vpu.dri-cdi.dev"

// accelNode is a Meteor Lake node: the i915 iGPU and the intel_vpu NPU
// (/dev/accel/accel0, char 261:0).
func accelNode() (gpu, npu drmtest.GPU) { return harness.IntelGPU(0), drmtest.IntelNPU }

// TestClusterAccel serves an Intel NPU through the device plugin, the way
// a user deploys dri-cdi: the product image and the kustomize base
// (through the e2e overlay, with a config whose i915 pool has companion
// nodes) on the real single-node cluster. The node
// has no accel driver, so an open that the device cgroup allows gives the
// probe result of a driverless major, which this test measures first
// (ENXIO, as for render nodes: the kernel has no driver for 261:0); an
// open the cgroup denies gives EPERM. The subtests run in order on one
// cluster.
func TestClusterAccel(t *testing.T) {
	ctx := context.Background()
	gpu, npu := accelNode()
	accel, render := harness.AccelPath(npu), harness.RenderPath(gpu)
	c := startCluster(t, harness.ClusterOptions{Name: "accel", GPUs: []drmtest.GPU{gpu, npu}})
	// The i915 pool has companions: a V4L2 node of the GPU's own PCI
	// function (tied to the card) and the DMA heaps (by path).
	for _, d := range []drmtest.CharDevice{
		{Class: "video4linux", Name: "video10", Parent: "pci0000:00/" + gpu.ID(), Major: 81, Minor: 10, GID: drmtest.VideoGID},
		{Class: "dma_heap", Name: "system", DevName: "dma_heap/system", Major: 240, Minor: 0},
	} {
		require.NoError(t, c.Node.Tree.AddCharDevice(d))
	}
	overlay, err := c.WriteOverlay(filepath.Join(c.Dir, "overlay"), harness.OverlayOptions{Config: companionConfig, DevPaths: []string{"video10", "dma_heap"}})
	require.NoError(t, err)
	hostAccel := filepath.Join(c.Node.DevRoot, "accel")

	requireStep(t, "DaemonSetReady", func(t *testing.T) {
		applyAndWaitReady(t, c, overlay, driCDIDaemonSet, driCDIPods)
	})

	requireStep(t, "AllocatableShowsTheNPUPool", func(t *testing.T) {
		require.NoError(t, c.WaitAllocatable(ctx, npuResource, 1, 60*time.Second))
		require.NoError(t, c.WaitAllocatable(ctx, resource, 1, 60*time.Second))
	})

	requireStep(t, "HostPathWithoutRequestIsEPERM", func(t *testing.T) {
		// The baseline: the node seen through a hostPath, no cgroup rule.
		apply(t, c, harness.ProbePod(harness.ProbePodSpec{Name: "npu-hostpath", Paths: []string{accel}, HostDir: hostAccel, Mount: "/dev/accel", Root: true}))
		res := claimPodProbes(t, c, "npu-hostpath", accel)
		require.Equal(t, harness.EPERM, res[accel].Errno, "a hostPath adds no cgroup rule: %s", res[accel].Message)
		kubectl(t, c, "delete", "pod", "npu-hostpath", "--wait=true")
	})

	var holder *harness.Pod
	requireStep(t, "DevicePluginPodOpensTheAccelNode", func(t *testing.T) {
		apply(t, c, harness.ProbePod(harness.ProbePodSpec{Name: "npu", Resource: npuResource, Paths: []string{accel, render, video}}))
		res := claimPodProbes(t, c, "npu", accel, render, video)
		require.Equal(t, harness.ENXIO, res[accel].Errno, "the NPU's node, as uid 1000: %s", res[accel].Message)
		require.Equal(t, harness.ENOENT, res[render].Errno, "the GPU is not the pod's: %s", res[render].Message)
		require.Equal(t, harness.ENOENT, res[video].Errno, "the i915 pool's companion is not the NPU pool's: %s", res[video].Message)
		holder = mustOnePod(t, c, "default", "app=npu")
		spec, err := c.Node.Inspect(ctx, holder.ContainerID("app"))
		require.NoError(t, err)
		require.Equal(t, []string{cdiName(npu)}, spec.CDIDevices, "the device plugin names the NPU's CDI device")
		var dev *harness.OCIDevice
		for i, d := range spec.Devices {
			if d.Path == accel {
				dev = &spec.Devices[i]
			}
		}
		require.NotNil(t, dev, "linux.devices: %+v", spec.Devices)
		require.Equal(t, [2]int64{accelMajor, int64(npu.Card)}, [2]int64{dev.Major, dev.Minor})
		ds := mustOnePod(t, c, driCDINamespace, driCDIPods)
		m := kubectl(t, c, "get", "--raw", "/api/v1/namespaces/"+driCDINamespace+"/pods/"+ds.Metadata.Name+":9471/proxy/metrics")
		require.GreaterOrEqual(t, metricValue(t, m, "dri_cdi_nri_handler_duration_seconds_count", "result", "verified"), 1.0, m)
		require.Zero(t, metricValue(t, m, "dri_cdi_nri_handler_duration_seconds_count", "result", "error"), m)
	})

	t.Run("PoolCompanionsAreDelivered", func(t *testing.T) {
		apply(t, c, harness.ProbePod(harness.ProbePodSpec{Name: "gpu", Resource: resource, Paths: []string{render, video, heap, accel}}))
		res := claimPodProbes(t, c, "gpu", render, video, heap, accel)
		for _, p := range []string{render, video, heap} {
			require.Equal(t, harness.ENXIO, res[p].Errno, "%s, as uid 1000: %s", p, res[p].Message)
		}
		require.Equal(t, harness.ENOENT, res[accel].Errno, "the NPU is not the pod's: %s", res[accel].Message)
		pod := mustOnePod(t, c, "default", "app=gpu")
		spec, err := c.Node.Inspect(ctx, pod.ContainerID("app"))
		require.NoError(t, err)
		got := map[string][2]int64{}
		for _, d := range spec.Devices {
			got[d.Path] = [2]int64{d.Major, d.Minor}
		}
		require.Equal(t, [2]int64{81, 10}, got[video], "linux.devices: %+v", spec.Devices)
		require.Equal(t, [2]int64{240, 0}, got[heap], "linux.devices: %+v", spec.Devices)
		kubectl(t, c, "delete", "pod", "gpu", "--wait=true")
	})

	t.Run("ForgedAnnotationsForTheNPUAreRefused", func(t *testing.T) {
		key, value := alloc.Annotation(npuResource, []string{npu.ID()})
		// A pod author's annotations: the allocation annotation and a CDI
		// name, next to a hostPath of /dev/accel. Nothing is granted.
		apply(t, c, harness.ProbePod(harness.ProbePodSpec{Name: "npu-forged", Paths: []string{accel}, HostDir: hostAccel, Mount: "/dev/accel", Root: true,
			Annotations: map[string]string{key: value, "cdi.k8s.io/forged": cdiName(npu)}}))
		res := claimPodProbes(t, c, "npu-forged", accel)
		require.Equal(t, harness.EPERM, res[accel].Errno, "forged pod annotations must grant nothing: %s", res[accel].Message)
		forged := mustOnePod(t, c, "default", "app=npu-forged")
		spec, err := c.Node.Inspect(ctx, forged.ContainerID("app"))
		require.NoError(t, err)
		requireNoDRMDevice(t, spec)
		kubectl(t, c, "delete", "pod", "npu-forged", "--wait=true")

		// A CRI client's container annotation, in the sandbox of the pod
		// that holds the NPU: authorization is per container.
		podID, err := c.Node.Crictl(ctx, "inspect", "-o", "go-template", "--template", "{{.info.sandboxID}}", holder.ContainerID("app"))
		require.NoError(t, err)
		r, refused := probeIntruder(t, c.Node, strings.TrimSpace(podID), map[string]string{key: value}, hostAccel, "/dev/accel", accel)
		if refused {
			return
		}
		require.Equal(t, harness.EPERM, r.Errno, "open %s: %s", r.Path, r.Message)
	})
}

// TestClusterDRAAccel serves the same NPU through DRA on a node labelled
// dri-cdi.dev/mode=dra with the DRA overlay: the slice publishes it with
// class accel, a claim of the intel_vpu DeviceClass and the unchanged
// extended-resource request (dri-cdi.dev/intel_vpu: 1) each open its
// accel node.
func TestClusterDRAAccel(t *testing.T) {
	ctx := context.Background()
	gpu, npu := accelNode()
	accel, render := harness.AccelPath(npu), harness.RenderPath(gpu)
	c := startCluster(t, harness.ClusterOptions{Name: "dra-accel", GPUs: []drmtest.GPU{gpu, npu}})

	requireStep(t, "DRADaemonSetReady", func(t *testing.T) {
		require.NoError(t, c.RequireDRA(ctx))
		require.NoError(t, c.LabelNode(ctx, draModeLabel, "dra"))
		overlay, err := c.WriteDRAOverlay(filepath.Join(c.Dir, "overlay-dra"))
		require.NoError(t, err)
		applyAndWaitReady(t, c, overlay, draDaemonSet, draPods)
	})

	requireStep(t, "SlicePublishesTheNPU", func(t *testing.T) {
		d := sliceDevice(t, waitSlice(t, c, 2), npu)
		require.Equal(t, "intel_vpu", d.Attributes["driver"])
		require.Equal(t, "accel", d.Attributes["class"])
		require.Equal(t, strconv.Itoa(npu.Card), d.Attributes["accelMinor"])
		require.Equal(t, npuResource, d.Attributes["resource"])
		require.Equal(t, npu.ID(), d.Attributes["resource.kubernetes.io/pciBusID"])
		require.NotContains(t, d.Attributes, "cardMinor")
	})

	requireStep(t, "ClaimOfTheNPUClassOpensTheAccelNode", func(t *testing.T) {
		apply(t, c, harness.ResourceClaimTemplate("npu", npuClass, ""))
		apply(t, c, harness.ClaimPod("npu-claim", harness.ClaimRef{Template: "npu"}, accel, render))
		res := claimPodProbes(t, c, "npu-claim", accel, render)
		require.Equal(t, harness.ENXIO, res[accel].Errno, "the NPU's node: %s", res[accel].Message)
		require.Equal(t, harness.ENOENT, res[render].Errno, "the GPU is not the pod's: %s", res[render].Message)
		cl := podClaim(t, c, "npu-claim")
		require.Equal(t, []string{sliceDevice(t, waitSlice(t, c, 2), npu).Name}, cl.Devices())
		kubectl(t, c, "delete", "pod", "npu-claim", "--wait=true")
	})

	requireStep(t, "ExtendedResourcePodIsServedByDRA", func(t *testing.T) {
		apply(t, c, harness.ProbePod(harness.ProbePodSpec{Name: "npu-ext", Resource: npuResource, Paths: []string{accel}}))
		res := claimPodProbes(t, c, "npu-ext", accel)
		require.Equal(t, harness.ENXIO, res[accel].Errno, "the NPU's node: %s", res[accel].Message)
		names, err := c.PodClaimNames(ctx, "default", "npu-ext")
		require.NoError(t, err)
		require.Len(t, names, 1, "the scheduler must have made the pod's extended-resource claim")
		kubectl(t, c, "delete", "pod", "npu-ext", "--wait=true")
	})
}

// applyAndWaitReady applies the kustomize overlay and waits until the
// DaemonSet ds is Ready; when the test fails, the output of the pods
// matching selector is logged.
func applyAndWaitReady(t *testing.T, c *harness.Cluster, overlay, ds, selector string) {
	t.Helper()
	kubectl(t, c, "apply", "-k", overlay)
	t.Cleanup(func() {
		if t.Failed() {
			logPodContainers(t, c, driCDINamespace, selector)
		}
	})
	require.NoError(t, c.WaitDaemonSetReady(context.Background(), driCDINamespace, ds, 3*time.Minute))
}
