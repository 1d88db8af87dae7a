package scenarios

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// The three nodes of TestMultiNode, like the first user's: A with two
// Intel cards, B with one AMD card (device plugin), C with one Intel and
// one AMD card (DRA).
const (
	nodeA = "node-a"
	nodeB = "node-b"
	nodeC = "node-c"

	amdResource = "dri-cdi.dev/amdgpu"
	// draUser is the DRA pod's service account, the one dri-cdi identity
	// that talks to the API server.
	draUser = "system:serviceaccount:dri-cdi:dri-cdi-dra"
)

// TestMultiNode runs dri-cdi on a cluster of three nodes, each a kubelet
// and a containerd in mount and network namespaces of its own (see
// harness.StartMultiNodeCluster): the repository's DRA overlay applied
// once with `kubectl apply -k` puts the device plugin on A and B and the
// DRA driver on C, which is labelled dri-cdi.dev/mode=dra. The cluster
// starts once; the subtests run in order on it, each building on the
// state the previous one left.
func TestMultiNode(t *testing.T) {
	ctx := context.Background()
	intelA0, intelA1 := harness.IntelGPU(0), harness.IntelGPU(1)
	amdB := amdWithoutKFD(0, 128)
	intelC, amdC := harness.IntelGPU(0), hybridAMD()
	started := time.Now()
	c := startForTest(t, "multi-node cluster", suite.StartMultiNodeCluster, harness.MultiNodeOptions{
		Name: "multinode",
		Nodes: []harness.NodeSpec{
			{Name: nodeA, GPUs: []drmtest.GPU{intelA0, intelA1}},
			{Name: nodeB, GPUs: []drmtest.GPU{amdB}},
			{Name: nodeC, GPUs: []drmtest.GPU{intelC, amdC}},
		},
	})
	t.Logf("FIGURE multi-node cluster start: %s", time.Since(started).Round(100*time.Millisecond))
	node := func(name string) *harness.Node {
		n := c.NodeNamed(name)
		require.NotNil(t, n, "node %s", name)
		return n
	}

	requireStep(t, "NodesRegisterWithTheirOwnAddresses", func(t *testing.T) {
		for _, name := range []string{nodeA, nodeB, nodeC} {
			var n struct {
				Status struct {
					Addresses []struct {
						Type    string `json:"type"`
						Address string `json:"address"`
					} `json:"addresses"`
				} `json:"status"`
			}
			require.NoError(t, c.GetJSON(ctx, &n, "node", name))
			var internal []string
			for _, a := range n.Status.Addresses {
				if a.Type == "InternalIP" {
					internal = append(internal, a.Address)
				}
			}
			require.Equal(t, []string{node(name).NodeIP()}, internal, "node %s", name)
		}
	})

	requireStep(t, "DaemonSetsLandOnTheRightNodes", func(t *testing.T) {
		require.NoError(t, c.LabelNodeNamed(ctx, nodeC, draModeLabel, "dra"))
		overlay, err := c.WriteDRAOverlay(filepath.Join(c.Dir, "overlay-dra"))
		require.NoError(t, err)
		kubectl(t, c, "apply", "-k", overlay)
		t.Cleanup(func() {
			if t.Failed() {
				logPodContainers(t, c, driCDINamespace, "")
			}
		})
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, driCDIDaemonSet, 3*time.Minute))
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, draDaemonSet, 3*time.Minute))
		require.ElementsMatch(t, []string{nodeA, nodeB}, podNodes(t, c, driCDINamespace, driCDIPods),
			"the device plugin runs on every node but the DRA one")
		require.ElementsMatch(t, []string{nodeC}, podNodes(t, c, driCDINamespace, draPods),
			"the DRA driver runs on the labelled node only")

		require.NoError(t, c.WaitAllocatableOf(ctx, nodeA, resource, 2, 90*time.Second))
		require.NoError(t, c.WaitAllocatableOf(ctx, nodeB, amdResource, 1, 90*time.Second))
		requireAllocatable(t, c, nodeA, amdResource, 0)
		requireAllocatable(t, c, nodeB, resource, 0)
		requireAllocatable(t, c, nodeC, resource, 0)
		requireAllocatable(t, c, nodeC, amdResource, 0)
		devs := waitSliceOf(t, c, nodeC, 2)
		require.Equal(t, "i915", sliceDevice(t, devs, intelC).Attributes["driver"])
		require.Equal(t, "amdgpu", sliceDevice(t, devs, amdC).Attributes["driver"])
		for _, name := range []string{nodeA, nodeB} {
			d, err := c.ResourceSliceDevicesOf(ctx, draDriver, name)
			require.NoError(t, err)
			require.Empty(t, d, "no slice for device-plugin node %s", name)
		}
	})

	requireStep(t, "MetricsOfEveryNodeThroughTheAPIServer", func(t *testing.T) {
		pods, err := c.Pods(ctx, driCDINamespace, "")
		require.NoError(t, err)
		seen := map[string][]string{}
		for _, p := range pods {
			ports := map[string]string{"9470": "dri_cdi_agent_devices", "9471": "dri_cdi_nri_connected"}
			if p.Spec.NodeName == nodeC {
				ports = map[string]string{"9472": "dri_cdi_dra_devices", "9471": "dri_cdi_nri_connected"}
			}
			for port, family := range ports {
				path := fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:%s/proxy/metrics", driCDINamespace, p.Metadata.Name, port)
				body := kubectl(t, c, "get", "--raw", path)
				require.True(t, exposedMetrics(t, body)[family], "%s (node %s): no %s", path, p.Spec.NodeName, family)
				seen[p.Spec.NodeName] = append(seen[p.Spec.NodeName], port)
			}
		}
		require.Len(t, seen, 3, "metrics of every node: %v", seen)
		t.Logf("scraped through the API server's pod proxy: %v", seen)
	})

	requireStep(t, "IntelDeploymentLandsOnlyOnA", func(t *testing.T) {
		// Two i915 cards: B has none, C has one (served through DRA's
		// extendedResourceName); only A has two.
		apply(t, c, harness.MediaServer("intel2", resource, 2))
		pod, rep := mediaServer(t, c, "intel2")
		require.Equal(t, nodeA, pod.Spec.NodeName)
		requireMediaServerOpens(t, rep)
	})

	requireStep(t, "DRAClaimByCELLandsOnlyOnC", func(t *testing.T) {
		apply(t, c, harness.ResourceClaimTemplate("intel", harness.DRAClass, `device.attributes["dri-cdi.dev"].driver == "i915"`))
		apply(t, c, harness.ClaimPod("cel", harness.ClaimRef{Template: "intel"}, harness.RenderPath(intelC), harness.RenderPath(amdC)))
		res := claimPodProbes(t, c, "cel", harness.RenderPath(intelC), harness.RenderPath(amdC))
		require.Equal(t, nodeC, mustOnePod(t, c, "default", "app=cel").Spec.NodeName)
		require.Equal(t, harness.ENXIO, res[harness.RenderPath(intelC)].Errno, "C's i915 card: %s", res[harness.RenderPath(intelC)].Message)
		require.Equal(t, harness.ENOENT, res[harness.RenderPath(amdC)].Errno, "C's amdgpu card is not the pod's")
		claim := podClaim(t, c, "cel")
		require.Equal(t, []string{sliceDevice(t, waitSliceOf(t, c, nodeC, 2), intelC).Name}, claim.Devices())
	})

	requireStep(t, "DrainAKeepsTheDeploymentPendingWithTheSchedulersReason", func(t *testing.T) {
		before := mustOnePod(t, c, "default", "app=intel2")
		kubectl(t, c, "drain", nodeA, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=2m")
		// No other node has two i915 cards: the new pod stays Pending,
		// and the scheduler says why.
		var msg string
		require.Eventually(t, func() bool {
			pods, err := c.Pods(ctx, "default", "app=intel2")
			if err != nil || len(pods) != 1 || pods[0].Metadata.UID == before.Metadata.UID {
				return false
			}
			status, reason, m := pods[0].Condition("PodScheduled")
			msg = m
			return status == "False" && reason == "Unschedulable"
		}, 90*time.Second, time.Second, "the drained Deployment's pod must be Pending, Unschedulable")
		t.Logf("the scheduler: %s", msg)
		require.Contains(t, msg, "0/3 nodes are available", "every node was considered")
		require.Contains(t, msg, "1 node(s) were unschedulable", "A is cordoned")
		// B and C have no two i915 cards for the device plugin, so the
		// scheduler tries DRA's extended resource there.
		require.Contains(t, msg, "2 cannot allocate all claims", "B and C")
		require.ElementsMatch(t, []string{nodeA, nodeB}, podNodes(t, c, driCDINamespace, driCDIPods), "drain keeps the DaemonSet")

		kubectl(t, c, "uncordon", nodeA)
		pod, rep := mediaServer(t, c, "intel2")
		require.Equal(t, nodeA, pod.Spec.NodeName, "uncordoned, A serves it again")
		requireMediaServerOpens(t, rep)
		kubectl(t, c, "delete", "deployment", "intel2", "--wait=true")
		waitNoPods(t, c, "default", "app=intel2", 2*time.Minute)
	})

	requireStep(t, "NodeFailureMovesTheGPUPodAfterItsToleration", func(t *testing.T) {
		// C's i915 card is the cel pod's: one i915 card can only go to A.
		const tolerate = 10 * time.Second
		apply(t, c, harness.MovableMediaServer("mover", resource, 1, tolerate))
		pod, rep := mediaServer(t, c, "mover")
		require.Equal(t, nodeA, pod.Spec.NodeName)
		requireMediaServerOpens(t, rep)
		// Free C's card, then fail A.
		kubectl(t, c, "delete", "pod", "cel", "--wait=true")

		a := node(nodeA)
		failed := time.Now()
		a.StopKubelet()
		require.NoError(t, c.WaitNodeReadiness(ctx, nodeA, false, 2*time.Minute))
		notReady := time.Since(failed)
		moved, out := waitPodOn(t, c, "default", "app=mover", nodeC, "server", 3*time.Minute)
		t.Logf("FIGURE node failure: A NotReady after %s, the GPU pod running on C after %s (toleration %s)",
			notReady.Round(100*time.Millisecond), time.Since(failed).Round(100*time.Millisecond), tolerate)
		require.NotEqual(t, pod.Metadata.UID, moved.Metadata.UID)
		rep, err := harness.ParseMedia(out)
		require.NoError(t, err)
		requireMediaServerOpens(t, rep)
		require.Equal(t, harness.RenderPath(intelC), rep.Node, "on C through DRA's extended resource")

		require.NoError(t, a.StartKubelet(ctx))
		require.NoError(t, c.WaitNodeReadyNamed(ctx, nodeA, 2*time.Minute))
		require.Eventually(t, func() bool {
			pods, err := c.Pods(ctx, "default", "app=mover")
			return err == nil && len(pods) == 1
		}, 2*time.Minute, time.Second, "A's kubelet, back, removes the evicted pod")
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, driCDIDaemonSet, 3*time.Minute))
		require.NoError(t, c.WaitAllocatableOf(ctx, nodeA, resource, 2, 90*time.Second))
	})

	requireStep(t, "CardUnpluggedOnOneNodeChangesOnlyThatNode", func(t *testing.T) {
		settle := 15 * time.Second
		requireOthers := func(t *testing.T) {
			t.Helper()
			requireAllocatable(t, c, nodeA, resource, 2)
			devs, err := c.ResourceSliceDevicesOf(ctx, draDriver, nodeC)
			require.NoError(t, err)
			require.Len(t, devs, 2, "C's slice")
		}
		// B, a device-plugin node: its allocatable only.
		for _, w := range cardChange(t, c, node(nodeB), amdB, settle, func(t *testing.T) {
			require.NoError(t, c.WaitAllocatableOf(ctx, nodeB, amdResource, 0, 90*time.Second))
			requireOthers(t)
		}, func(t *testing.T) {
			require.NoError(t, c.WaitAllocatableOf(ctx, nodeB, amdResource, 1, 90*time.Second))
		}) {
			t.Logf("FIGURE card %s on device-plugin node B: %d nodes/status writes by B's kubelet, %d requests by dri-cdi (in %s)", w.what,
				countRequests(w.reqs, "system:node:"+nodeB, "nodes/status", writeVerbs...),
				countRequests(w.reqs, "system:serviceaccount:dri-cdi:", ""), w.took.Round(time.Second))
		}

		// C, the DRA node: its slice only.
		for _, w := range cardChange(t, c, node(nodeC), amdC, settle, func(t *testing.T) {
			waitSliceOf(t, c, nodeC, 1)
			requireAllocatable(t, c, nodeA, resource, 2)
			requireAllocatable(t, c, nodeB, amdResource, 1)
		}, func(t *testing.T) {
			waitSliceOf(t, c, nodeC, 2)
		}) {
			writes := countRequests(w.reqs, draUser, "resourceslices", writeVerbs...)
			t.Logf("FIGURE card %s on DRA node C: %d ResourceSlice writes, %d nodes/status writes by C's kubelet (in %s)", w.what,
				writes, countRequests(w.reqs, "system:node:"+nodeC, "nodes/status", writeVerbs...), w.took.Round(time.Second))
			require.GreaterOrEqual(t, writes, 1, "the slice must have been written")
		}
	})

	requireStep(t, "RollingUpdateMovesThroughTheNodesOneAtATime", func(t *testing.T) {
		// GPU pods on a device-plugin node and on the DRA node: A's
		// second i915 card, and C's, which the mover holds.
		apply(t, c, harness.MediaServer("on-a", resource, 1))
		onA, repA := mediaServer(t, c, "on-a")
		require.Equal(t, nodeA, onA.Spec.NodeName)
		mover := mustOnePod(t, c, "default", "app=mover")
		require.Equal(t, nodeC, mover.Spec.NodeName)
		gpuPods := []struct {
			app  string
			pod  *harness.Pod
			path string
		}{{"on-a", onA, repA.Node}, {"mover", mover, harness.RenderPath(intelC)}}

		tag, err := c.TagImage(ctx, "v0.1.0-e2e-next")
		require.NoError(t, err)
		next, err := c.WriteDRAOverlayWith(filepath.Join(c.Dir, "overlay-next"), harness.OverlayOptions{ImageTag: tag[strings.LastIndexByte(tag, ':')+1:]})
		require.NoError(t, err)
		before := map[string]string{}
		for _, p := range mustPods(t, c, driCDINamespace, "") {
			before[p.Spec.NodeName] = p.Metadata.UID
		}

		// Watch which nodes lack a Ready dri-cdi pod through the rollout.
		w := watchDaemonPods(c, []string{nodeA, nodeB, nodeC})
		start := time.Now()
		kubectl(t, c, "apply", "-k", next)
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, driCDIDaemonSet, 4*time.Minute))
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, draDaemonSet, 4*time.Minute))
		rollout := time.Since(start)
		maxDown, order := w.stop()
		t.Logf("FIGURE rolling update of both DaemonSets over 3 nodes: %s; nodes in the order their pod went: %v; at most %d device-plugin node(s) without a Ready pod at once",
			rollout.Round(100*time.Millisecond), order, maxDown)
		require.Equal(t, 1, maxDown, "the device plugin's DaemonSet (maxUnavailable 1) must roll one node at a time")
		for _, p := range mustPods(t, c, driCDINamespace, "") {
			require.NotEqual(t, before[p.Spec.NodeName], p.Metadata.UID, "node %s's dri-cdi pod must have been replaced", p.Spec.NodeName)
			for _, ctr := range p.Spec.Containers {
				require.Equal(t, tag, ctr.Image, "%s container %s", p.Metadata.Name, ctr.Name)
			}
		}
		require.NoError(t, c.WaitAllocatableOf(ctx, nodeA, resource, 2, 90*time.Second))
		require.NoError(t, c.WaitAllocatableOf(ctx, nodeB, amdResource, 1, 90*time.Second))

		for _, g := range gpuPods {
			after := mustOnePod(t, c, "default", "app="+g.app)
			require.Equal(t, g.pod.Metadata.UID, after.Metadata.UID, "the GPU pod must keep running")
			id := g.pod.ContainerID("server")
			require.Equal(t, id, after.ContainerID("server"), "the GPU container must not be restarted")
			r := probeRunningOn(t, node(after.Spec.NodeName), id, g.path)
			require.Equal(t, harness.ENXIO, r.Errno, "%s on %s must keep its device: %s", after.Metadata.Name, after.Spec.NodeName, r.Message)
		}
		kubectl(t, c, "delete", "deployment", "on-a", "--wait=true")
	})

	requireStep(t, "APIRequestsPerNodeAtRest", func(t *testing.T) {
		// What dri-cdi asked of the API server over the whole run, by
		// verb and resource: its watches are opened once and kept.
		all, err := c.AuditRequests(started, time.Now())
		require.NoError(t, err)
		ours := map[string]int{}
		for _, r := range all {
			if strings.HasPrefix(r.User, "system:serviceaccount:dri-cdi:") {
				ours[r.User+" "+r.Verb+" "+r.Resource]++
			}
		}
		t.Logf("FIGURE dri-cdi's requests over the run (%s): %v", time.Since(started).Round(time.Second), ours)

		// The previous steps' pods are gone; let the kubelets settle.
		const settle, window = 20 * time.Second, 60 * time.Second
		time.Sleep(settle)
		from := time.Now()
		time.Sleep(window)
		reqs, err := c.AuditRequests(from, from.Add(window))
		require.NoError(t, err)
		byUser := map[string]map[string]int{}
		for _, r := range reqs {
			if byUser[r.User] == nil {
				byUser[r.User] = map[string]int{}
			}
			byUser[r.User][r.Verb+" "+r.Resource]++
		}
		users := make([]string, 0, len(byUser))
		for u := range byUser {
			users = append(users, u)
		}
		sort.Strings(users)
		for _, u := range users {
			total := 0
			var parts []string
			for k, v := range byUser[u] {
				total += v
				parts = append(parts, fmt.Sprintf("%s=%d", k, v))
			}
			sort.Strings(parts)
			t.Logf("FIGURE at rest, %s: %d requests in %s (%s)", u, total, window, strings.Join(parts, ", "))
		}
		for _, u := range users {
			if strings.HasPrefix(u, "system:serviceaccount:dri-cdi:") {
				require.Equal(t, draUser, u, "only the DRA driver talks to the API server; the device plugin never does")
			}
		}
		for _, name := range []string{nodeA, nodeB, nodeC} {
			require.Contains(t, users, "system:node:"+name, "every kubelet heartbeats")
		}
	})

	requireStep(t, "NothingLeftBehind", func(t *testing.T) {
		require.NoError(t, c.Close())
		left := harness.Leftovers(suite.WorkDir)
		require.Empty(t, left)
	})
}

// writeVerbs are the API verbs that write an object.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// countRequests counts the requests of user (a prefix ending in ":"
// matches every user under it) on resource ("" any) with one of verbs
// (none: any).
func countRequests(reqs []harness.AuditRequest, user, resource string, verbs ...string) int {
	n := 0
	for _, r := range reqs {
		if strings.HasSuffix(user, ":") && !strings.HasPrefix(r.User, user) || !strings.HasSuffix(user, ":") && r.User != user {
			continue
		}
		if resource != "" && r.Resource != resource || len(verbs) > 0 && !slices.Contains(verbs, r.Verb) {
			continue
		}
		n++
	}
	return n
}

// podNodes lists the nodes the pods matching selector in ns run on.
func podNodes(t *testing.T, c *harness.Cluster, ns, selector string) []string {
	t.Helper()
	pods, err := c.Pods(context.Background(), ns, selector)
	require.NoError(t, err)
	var out []string
	for _, p := range pods {
		out = append(out, p.Spec.NodeName)
	}
	return out
}

// requireAllocatable checks a node's allocatable count of resource now.
func requireAllocatable(t *testing.T, c *harness.Cluster, node, resource string, want int64) {
	t.Helper()
	v, err := c.AllocatableOf(context.Background(), node, resource)
	require.NoError(t, err)
	require.Equal(t, want, v, "node %s allocatable %s", node, resource)
}

// waitPodOn waits until a pod matching selector runs on node and its
// container printed the probe's end, and returns it with the output.
func waitPodOn(t *testing.T, c *harness.Cluster, ns, selector, node, container string, timeout time.Duration) (*harness.Pod, string) {
	t.Helper()
	ctx := context.Background()
	var found *harness.Pod
	var out string
	require.Eventually(t, func() bool {
		pods, err := c.Pods(ctx, ns, selector)
		if err != nil {
			return false
		}
		for i := range pods {
			if pods[i].Spec.NodeName != node || pods[i].Status.Phase != "Running" {
				continue
			}
			o, err := c.ContainerLogs(ctx, &pods[i], container)
			if err == nil && strings.Contains(o, harness.ProbeDone) {
				found, out = &pods[i], o
				return true
			}
		}
		return false
	}, timeout, time.Second, "a pod %s on %s", selector, node)
	return found, out
}

// mustPods lists the pods matching selector in ns.
func mustPods(t *testing.T, c *harness.Cluster, ns, selector string) []harness.Pod {
	t.Helper()
	pods, err := c.Pods(context.Background(), ns, selector)
	require.NoError(t, err)
	return pods
}

// daemonWatch samples which nodes lack a Ready dri-cdi pod.
type daemonWatch struct {
	done, stopped chan struct{}
	maxDown       int
	order         []string
}

// watchDaemonPods samples the pods of namespace dri-cdi every 250ms:
// the most device-plugin nodes (all but the last of nodes, the DRA one)
// without a Ready pod at once, and the order in which nodes lost theirs.
func watchDaemonPods(c *harness.Cluster, nodes []string) *daemonWatch {
	w := &daemonWatch{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		down := map[string]bool{}
		for {
			pods, err := c.Pods(context.Background(), driCDINamespace, "")
			if err == nil {
				ready := map[string]bool{}
				for i := range pods {
					if harness.Running(&pods[i]) {
						ready[pods[i].Spec.NodeName] = true
					}
				}
				n := 0
				for i, node := range nodes {
					if !ready[node] && !down[node] {
						w.order = append(w.order, node)
					}
					down[node] = !ready[node]
					if down[node] && i < len(nodes)-1 {
						n++
					}
				}
				w.maxDown = max(w.maxDown, n)
			}
			select {
			case <-w.done:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return w
}

// stop ends the sampling and returns what it saw.
func (w *daemonWatch) stop() (maxDown int, order []string) {
	close(w.done)
	<-w.stopped
	return w.maxDown, w.order
}

// cardWindow is what the API server was asked in one half of a cardChange.
type cardWindow struct {
	what string
	reqs []harness.AuditRequest
	took time.Duration
}

// cardChange removes card g from node n's tree, runs gone, lets the
// cluster settle, adds g back, runs back and settles again, and returns
// the audited requests of the unplug and of the replug.
func cardChange(t *testing.T, c *harness.Cluster, n *harness.Node, g drmtest.GPU, settle time.Duration, gone, back func(t *testing.T)) []cardWindow {
	t.Helper()
	t0 := time.Now()
	require.NoError(t, n.Tree.Remove(g.ID()))
	gone(t)
	time.Sleep(settle)
	t1 := time.Now()
	require.NoError(t, n.Tree.Add(g))
	back(t)
	time.Sleep(settle)
	t2 := time.Now()
	var out []cardWindow
	for _, w := range []struct {
		what     string
		from, to time.Time
	}{{"unplug", t0, t1}, {"replug", t1, t2}} {
		reqs, err := c.AuditRequests(w.from, w.to)
		require.NoError(t, err)
		out = append(out, cardWindow{w.what, reqs, w.to.Sub(w.from)})
	}
	return out
}
