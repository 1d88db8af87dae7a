package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestClusterKustomize deploys dri-cdi the way a user does, on a real
// single-node cluster (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, a kubelet registered with them, containerd, runc, CNI
// bridge): the product image from `make image` imported into containerd,
// `kubectl apply -k` of the kustomize base through the e2e overlay, and
// GPU workloads placed by the scheduler. The subtests run in order on the
// same cluster, each building on the state the previous one left.
func TestClusterKustomize(t *testing.T) {
	ctx := context.Background()
	gpus := []drmtest.GPU{harness.IntelGPU(0), harness.IntelGPU(1)}
	c := startCluster(t, harness.ClusterOptions{Name: "kustomize", GPUs: gpus})
	overlay, err := c.WriteOverlay(filepath.Join(c.Dir, "overlay"), harness.OverlayOptions{})
	require.NoError(t, err)

	requireStep(t, "DaemonSetReadyThroughProbes", func(t *testing.T) {
		rendered, err := c.Kustomize(ctx, overlay)
		require.NoError(t, err)
		require.Contains(t, rendered, "image: "+c.Image, "the manifests must name the image `make image` built")
		kubectl(t, c, "apply", "-k", overlay)
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, driCDIDaemonSet, 3*time.Minute))
		pods, err := c.Pods(ctx, driCDINamespace, driCDIPods)
		require.NoError(t, err)
		require.Len(t, pods, 1)
		require.Equal(t, harness.NodeName, pods[0].Spec.NodeName)
		require.True(t, strings.HasPrefix(pods[0].Status.PodIP, "198.18."), "pod IP %q must come from the CNI bridge's range", pods[0].Status.PodIP)
		for _, s := range pods[0].Status.ContainerStatuses {
			require.True(t, s.Ready, "container %s ready through its readiness probe", s.Name)
			require.Zero(t, s.RestartCount, "container %s restarted (liveness probe or crash)", s.Name)
		}
	})

	requireStep(t, "AllocatableShowsResource", func(t *testing.T) {
		require.NoError(t, c.WaitAllocatable(ctx, resource, int64(len(gpus)), 60*time.Second))
	})

	var media *harness.MediaReport
	requireStep(t, "MediaServerDeploymentGetsDevice", func(t *testing.T) {
		apply(t, c, harness.MediaServer("media", resource, 1))
		pod, rep := mediaServer(t, c, "media")
		require.Equal(t, harness.NodeName, pod.Spec.NodeName, "the scheduler must place the pod on the node")
		requireMediaServerOpens(t, rep)
		media = rep
	})

	t.Run("MediaServerSeesHostRenderGroup", func(t *testing.T) {
		// A root-started image joins the group the node shows; it must be
		// the host's render group, never 0 (docs: device ownership).
		requireMediaServerWorks(t, media)
	})

	t.Run("OverRequestStaysPending", func(t *testing.T) {
		apply(t, c, harness.GPUPod("greedy", resource, len(gpus)+1))
		pod, err := c.WaitPod(ctx, "default", "app=greedy", 60*time.Second, func(p *harness.Pod) bool {
			status, reason, _ := p.Condition("PodScheduled")
			return status == "False" && reason == "Unschedulable"
		})
		require.NoError(t, err)
		_, _, msg := pod.Condition("PodScheduled")
		t.Logf("scheduler: %s", msg)
		require.Contains(t, msg, "Insufficient "+resource)
		require.Equal(t, "Pending", pod.Status.Phase)
		require.Empty(t, pod.Spec.NodeName)
		kubectl(t, c, "delete", "pod", "greedy", "--wait=true")
	})

	t.Run("MetricsThroughAPIServerProxy", func(t *testing.T) {
		pods, err := c.Pods(ctx, driCDINamespace, driCDIPods)
		require.NoError(t, err)
		require.Len(t, pods, 1)
		for _, m := range []struct {
			port, page string
			must       []string
		}{
			{"9470", "metrics.md", []string{"dri_cdi_agent_build_info", "dri_cdi_agent_registered", "dri_cdi_agent_devices", "dri_cdi_agent_allocations_total"}},
			{"9471", "metrics-nri.md", []string{"dri_cdi_nri_connected", "dri_cdi_nri_containers_total", "dri_cdi_nri_handler_duration_seconds"}},
		} {
			path := fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:%s/proxy/metrics", driCDINamespace, pods[0].Metadata.Name, m.port)
			body := kubectl(t, c, "get", "--raw", path)
			exposed, documented := exposedMetrics(t, body), documentedMetrics(t, m.page)
			for _, name := range m.must {
				require.True(t, exposed[name], "%s: %s missing; exposed %v", path, name, exposed)
			}
			for name := range exposed {
				require.True(t, documented[name], "%s exposes %s, which docs/%s does not document", path, name, m.page)
			}
			t.Logf("%s: %d documented dri_cdi metric families", path, len(exposed))
		}
	})

	// A newcomer's path through policy engines and GitOps
	// (cluster_policy_test.go).
	t.Run("KyvernoExceptionNextToDaemonSet", func(t *testing.T) { policyExceptionNextToDaemonSet(t, c) })
	t.Run("DoctorThroughAPIServerProxy", func(t *testing.T) { doctorThroughAPIServerProxy(t, c) })
	t.Run("GitOpsExamplesAgainstSchemas", func(t *testing.T) { gitOpsExamples(t, c) })
	t.Run("PolicyRecipesOffline", func(t *testing.T) { policyRecipesOffline(t, c) })

	t.Run("AllocatableFollowsHotplug", func(t *testing.T) {
		hot := harness.IntelGPU(2)
		require.NoError(t, c.Node.Tree.Add(hot))
		require.NoError(t, c.WaitAllocatable(ctx, resource, int64(len(gpus)+1), 90*time.Second), "allocatable must grow")
		require.NoError(t, c.Node.Tree.Remove(hot.ID()))
		require.NoError(t, c.WaitAllocatable(ctx, resource, int64(len(gpus)), 90*time.Second), "allocatable must shrink")
	})

	t.Run("RollingUpdateWhileGPUPodRuns", func(t *testing.T) {
		before := mustOnePod(t, c, "default", "app=media")
		id := before.ContainerID("server")
		require.NotEmpty(t, id)
		_, rep := mediaServer(t, c, "media")
		tag, err := c.TagImage(ctx, "v0.1.0-e2e-next")
		require.NoError(t, err)
		newTag := tag[strings.LastIndexByte(tag, ':')+1:]
		next, err := c.WriteOverlay(filepath.Join(c.Dir, "overlay-next"), harness.OverlayOptions{
			ImageTag: newTag,
			// A pool for a vendor this node does not have: a new config
			// that must not disturb the i915 pool in use.
			Config: "cdiKind: dri-cdi.dev/gpu\ndefaultPools: true\npools:\n- resource: dri-cdi.dev/e2e-none\n  pciIDs: [\"ffff:ffff\"]\n",
		})
		require.NoError(t, err)
		oldDS := mustOnePod(t, c, driCDINamespace, driCDIPods)

		// Watch the node's allocatable through the rollout.
		var mu sync.Mutex
		var samples []sample
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				v, err := c.Allocatable(ctx, resource)
				mu.Lock()
				samples = append(samples, sample{time.Now(), v, err})
				mu.Unlock()
				select {
				case <-stop:
					return
				case <-time.After(500 * time.Millisecond):
				}
			}
		}()
		start := time.Now()
		kubectl(t, c, "apply", "-k", next)
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, driCDIDaemonSet, 3*time.Minute))
		rollout := time.Since(start)
		require.NoError(t, c.WaitAllocatable(ctx, resource, int64(len(gpus)), 60*time.Second), "the resource must come back after the rollout")
		close(stop)
		<-done
		newDS := mustOnePod(t, c, driCDINamespace, driCDIPods)
		require.NotEqual(t, oldDS.Metadata.UID, newDS.Metadata.UID, "the DaemonSet pod must have been replaced")
		// The spec, not status.image: the runtime reports one of the
		// image's tags, and both tags name the same image here.
		for _, ctr := range newDS.Spec.Containers {
			require.Equal(t, tag, ctr.Image, "container %s must run the new tag", ctr.Name)
		}
		mu.Lock()
		gap := longestGap(samples, int64(len(gpus)))
		mu.Unlock()
		t.Logf("rollout took %s; the longest time %s was below %d: %s", rollout.Round(100*time.Millisecond), resource, len(gpus), gap.Round(100*time.Millisecond))
		require.LessOrEqual(t, gap, rollout+10*time.Second, "the resource was gone from the node for longer than the rollout")

		after := mustOnePod(t, c, "default", "app=media")
		require.Equal(t, before.Metadata.UID, after.Metadata.UID, "the GPU pod must keep running")
		require.Equal(t, id, after.ContainerID("server"), "the GPU container must not be restarted")
		r := probeRunning(t, c, id, rep.Node)
		require.Equal(t, harness.ENXIO, r.Errno, "the running pod must keep its device: %s", r.Message)

		apply(t, c, harness.MediaServer("media-after", resource, 1))
		_, rep2 := mediaServer(t, c, "media-after")
		requireMediaServerOpens(t, rep2)
		require.NotEqual(t, rep.Node, rep2.Node, "the new pod must get the other card")
		kubectl(t, c, "delete", "deployment", "media-after", "--wait=true")
		waitNoPods(t, c, "default", "app=media-after", 60*time.Second)
	})

	t.Run("NodeRebootGPUPodComesBack", func(t *testing.T) {
		before := mustOnePod(t, c, "default", "app=media")
		require.NoError(t, c.Node.SimulateReboot(ctx))
		require.NoError(t, c.WaitNodeReady(ctx, 2*time.Minute))
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, driCDIDaemonSet, 3*time.Minute))
		require.NoError(t, c.WaitAllocatable(ctx, resource, int64(len(gpus)), 90*time.Second))
		// The kubelet re-admits the pod before the device plugin registered
		// again and rejects it (UnexpectedAdmissionError, "no healthy
		// devices"); the Deployment replaces it. That is why the GPU
		// workload must be a Deployment (or StatefulSet), not a bare pod.
		var pod *harness.Pod
		require.Eventually(t, func() bool {
			pods, err := c.Pods(ctx, "default", "app=media")
			if err != nil {
				return false
			}
			for i := range pods {
				if harness.Running(&pods[i]) {
					pod = &pods[i]
					return true
				}
			}
			return false
		}, 3*time.Minute, time.Second, "a pod of the Deployment must run again")
		t.Logf("after the reboot the Deployment runs pod %s (the pod from before: %v)", pod.Metadata.Name, pod.Metadata.UID == before.Metadata.UID)
		if pod.Metadata.UID != before.Metadata.UID {
			failed, _ := c.Kubectl(ctx, "get", "pod", before.Metadata.Name, "-o", "jsonpath={.status.reason}: {.status.message}")
			t.Logf("the pod from before the reboot: %s", failed)
			kubectl(t, c, "delete", "pod", before.Metadata.Name, "--wait=true")
		}
		_, rep := mediaServer(t, c, "media")
		requireMediaServerOpens(t, rep)
	})

	t.Run("DebugNodeDoctor", func(t *testing.T) {
		n := c.Node
		out := kubectl(t, c, "debug", "node/"+harness.NodeName, "--image="+c.Image, "--image-pull-policy=Never", "--quiet", "--",
			"dri-cdi", "doctor", "--host-root=/host", "-o", "json",
			"--containerd-config="+filepath.Join(n.Dir, "containerd.toml"),
			"--containerd-version="+n.ContainerdVersion(ctx),
			"--cdi-dir="+n.CDIDir,
			"--sysfs-root="+n.SysfsRoot,
			"--dev-root="+n.DevRoot,
			"--nri-socket="+n.NRISocket,
			"--pod-resources-socket="+n.PodResourcesSocket)
		t.Logf("kubectl debug: %s", out)
		var report harness.DoctorReport
		var raw string
		require.Eventually(t, func() bool {
			pods, err := c.Pods(ctx, "default", "")
			if err != nil {
				return false
			}
			for i := range pods {
				p := &pods[i]
				if !strings.HasPrefix(p.Metadata.Name, "node-debugger-") || p.Status.Phase != "Succeeded" && p.Status.Phase != "Failed" {
					continue
				}
				logs, err := c.ContainerLogs(ctx, p, "debugger")
				if err != nil {
					return false
				}
				raw = logs
				return json.Unmarshal([]byte(logs), &report) == nil
			}
			return false
		}, 2*time.Minute, time.Second, "the debug pod must finish and print the doctor's JSON report")
		t.Logf("doctor in the debug pod:\n%s", raw)
		require.NotEmpty(t, report.Results)
		require.Empty(t, report.Failures(), "the doctor, run from the product image, must pass this node")
		require.Equal(t, harness.DeliveryCDICRI, report.Recommended)
	})

	t.Run("UninstallLeavesDocumentedState", func(t *testing.T) {
		pod := mustOnePod(t, c, "default", "app=media")
		_, rep := mediaServer(t, c, "media")
		kubectl(t, c, "delete", "-k", overlay, "--wait=true")
		waitNoPods(t, c, driCDINamespace, driCDIPods, 2*time.Minute)
		// What stays, as docs/e2e.md and deployments/README.md describe.
		names, err := harness.CDINames(c.Node.CDIDir)
		require.NoError(t, err)
		t.Logf("CDI devices left in %s: %v", c.Node.CDIDir, names)
		require.NotEmpty(t, names, "the CDI specs stay: running pods' containers may be recreated from them")
		after := mustOnePod(t, c, "default", "app=media")
		require.Equal(t, pod.Metadata.UID, after.Metadata.UID, "the running GPU pod keeps running")
		r := probeRunning(t, c, pod.ContainerID("server"), rep.Node)
		require.Equal(t, harness.ENXIO, r.Errno, "and keeps its device: %s", r.Message)
		// The plugin's devices turn unhealthy when its socket goes; the
		// kubelet's next node-status update shows allocatable 0, while
		// capacity keeps them for the kubelet's grace period (5 minutes).
		require.NoError(t, c.WaitAllocatable(ctx, resource, 0, 60*time.Second), "with the device plugin gone no new GPU pod may be scheduled here")
		st, err := c.NodeStatus(ctx)
		require.NoError(t, err)
		t.Logf("node after uninstall: capacity %s=%q, allocatable %q", resource, st.Capacity[resource], st.Allocatable[resource])
	})
}
