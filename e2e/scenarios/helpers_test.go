package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

const (
	// resource is the default pool of the fake i915 cards.
	resource = "dri-cdi.dev/i915"
	// cdiKind is the default CDI kind.
	cdiKind = "dri-cdi.dev/gpu"
	// drmMajor is the DRM character device major.
	drmMajor = 226
	// accelMajor is the accel character device major.
	accelMajor = drm.AccelMajor
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
	for _, major := range []int64{drmMajor, accelMajor} {
		for _, d := range spec.Devices {
			require.NotEqual(t, major, d.Major, "linux.devices has DRM or accel device %s", d.Path)
		}
		for _, r := range spec.Rules {
			if r.Allow && r.Major != nil && *r.Major == major {
				t.Fatalf("linux.resources.devices allows c %d:%v", major, ptrString(r.Minor))
			}
		}
	}
}

// probeIntruder creates and starts, through CRI, a container "intruder"
// in the pod sandbox podID, with the given container annotations and the
// host directory hostDir bind-mounted at mount, which probes path as
// root. A CRI client can set container annotations directly; they reach
// the NRI plugin exactly like the kubelet's Allocate annotations. The
// intruder carries the kubelet's labels of that pod, or the kubelet
// would remove it as an orphan before it ran, and the pod's own sandbox
// config, so that it joins the pod's cgroup and teardown finds it. It
// returns refused when dri-cdi-nri failed its creation (an acceptable
// answer to a claim the kubelet does not back); otherwise the created
// intruder must hold no DRM or accel device, and its probe result is
// returned.
func probeIntruder(t *testing.T, n *harness.Node, podID string, annotations map[string]string, hostDir, mount, path string) (harness.ProbeResult, bool) {
	t.Helper()
	ctx := context.Background()
	out, err := n.Crictl(ctx, "inspectp", "-o", "json", podID)
	require.NoError(t, err)
	var pod struct {
		Status struct {
			Metadata struct {
				Name, Namespace, UID string
			} `json:"metadata"`
		} `json:"status"`
		Info struct {
			Config struct {
				Linux struct {
					CgroupParent    string `json:"cgroup_parent"`
					SecurityContext struct {
						NamespaceOptions struct {
							Network int `json:"network"`
						} `json:"namespace_options"`
					} `json:"security_context"`
				} `json:"linux"`
			} `json:"config"`
		} `json:"info"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &pod))
	meta, linux := pod.Status.Metadata, pod.Info.Config.Linux
	require.NotEmpty(t, meta.UID)
	require.True(t, strings.HasPrefix(linux.CgroupParent, "/"+n.CgroupRoot()+"/"), "pod cgroup %q", linux.CgroupParent)
	dir := t.TempDir()
	sandbox := map[string]any{
		"metadata":      map[string]any{"name": meta.Name, "namespace": meta.Namespace, "uid": meta.UID},
		"log_directory": dir,
		"linux": map[string]any{
			"cgroup_parent":    linux.CgroupParent,
			"security_context": map[string]any{"namespace_options": map[string]any{"network": linux.SecurityContext.NamespaceOptions.Network}},
		},
	}
	intruder := map[string]any{
		"metadata":    map[string]any{"name": "intruder"},
		"image":       map[string]any{"image": harness.BusyboxImage},
		"command":     []string{"/bin/sh", "-c", harness.ProbeAndWait(path)},
		"log_path":    "intruder.log",
		"annotations": annotations,
		"labels": map[string]string{
			"io.kubernetes.pod.name":       meta.Name,
			"io.kubernetes.pod.namespace":  meta.Namespace,
			"io.kubernetes.pod.uid":        meta.UID,
			"io.kubernetes.container.name": "intruder",
		},
		"mounts": []any{map[string]any{"container_path": mount, "host_path": hostDir}},
		"linux":  map[string]any{},
	}
	sbFile, ctrFile := filepath.Join(dir, "sandbox.json"), filepath.Join(dir, "container.json")
	writeJSON(t, sbFile, sandbox)
	writeJSON(t, ctrFile, intruder)

	out, err = n.Crictl(ctx, "create", podID, ctrFile, sbFile)
	if err != nil {
		// Only dri-cdi's NRI plugin may refuse it: a runtime that fails
		// the intruder for another reason proves nothing.
		require.ErrorContains(t, err, "dri-cdi", "the intruder must be refused by dri-cdi-nri, if at all")
		t.Logf("the intruder was refused: %v", err)
		return harness.ProbeResult{}, true
	}
	ctrID := strings.TrimSpace(out)
	t.Cleanup(func() { _, _ = n.Crictl(ctx, "rm", "-f", ctrID) })
	spec, err := n.Inspect(ctx, ctrID)
	require.NoError(t, err)
	requireNoDRMDevice(t, spec)
	out, err = n.Crictl(ctx, "start", ctrID)
	require.NoError(t, err, out)
	var logs string
	require.Eventually(t, func() bool {
		logs, _ = n.Logs(ctx, ctrID)
		return strings.Contains(logs, harness.ProbeDone)
	}, 60*time.Second, 250*time.Millisecond, "no probe output from the intruder: %s", containerState(ctx, n, ctrID))
	t.Logf("intruder output:\n%s", logs)
	r, err := harness.ParseProbe(logs, path)
	require.NoError(t, err)
	return r, false
}

func ptrString(p *int64) string {
	if p == nil {
		return "*"
	}
	return fmt.Sprint(*p)
}

func cdiName(card drmtest.GPU) string { return cdiKind + "=" + card.ID() }

func int64p(v int64) *int64 { return &v }

// logPodContainers logs the output of every container of the pods
// matching selector, read through CRI, for a failed step.
func logPodContainers(t *testing.T, c *harness.Cluster, ns, selector string) {
	pods, err := c.Pods(context.Background(), ns, selector)
	if err != nil {
		t.Logf("list pods %s: %v", selector, err)
		return
	}
	for i := range pods {
		for _, s := range pods[i].Status.ContainerStatuses {
			out, err := c.ContainerLogs(context.Background(), &pods[i], s.Name)
			t.Logf("---- %s/%s container %s (err %v) ----\n%s", ns, pods[i].Metadata.Name, s.Name, err, out)
		}
	}
}

// waitSlice waits until the single node's ResourceSlice of our driver
// lists n devices and returns them.
func waitSlice(t *testing.T, c *harness.Cluster, n int) map[string]harness.SliceDevice {
	t.Helper()
	return waitSliceOf(t, c, harness.NodeName, n)
}

// waitSliceOf waits until node's ResourceSlice of our driver lists n
// devices and returns them.
func waitSliceOf(t *testing.T, c *harness.Cluster, node string, n int) map[string]harness.SliceDevice {
	t.Helper()
	var devs map[string]harness.SliceDevice
	require.Eventually(t, func() bool {
		var err error
		devs, err = c.ResourceSliceDevicesOf(context.Background(), draDriver, node)
		return err == nil && len(devs) == n
	}, 90*time.Second, 250*time.Millisecond, "ResourceSlice of %s on %s must list %d devices, lists %v", draDriver, node, n, devs)
	return devs
}

// sliceDevice finds g in the slice by its id attribute.
func sliceDevice(t *testing.T, devs map[string]harness.SliceDevice, g drmtest.GPU) harness.SliceDevice {
	t.Helper()
	for _, d := range devs {
		if d.Attributes["id"] == g.ID() {
			return d
		}
	}
	t.Fatalf("no device with id %s in the slice: %v", g.ID(), devs)
	return harness.SliceDevice{}
}

// claimPodProbes waits for a ClaimPod's (or AnnotatedPod's) probe output.
func claimPodProbes(t *testing.T, c *harness.Cluster, name string, paths ...string) map[string]harness.ProbeResult {
	t.Helper()
	_, out, err := c.WaitContainerOutput(context.Background(), "default", "app="+name, "app", harness.ProbeDone, 2*time.Minute)
	require.NoError(t, err)
	return parseProbes(t, out, paths...)
}

// podClaim returns the one ResourceClaim a pod uses.
func podClaim(t *testing.T, c *harness.Cluster, pod string) harness.Claim {
	t.Helper()
	names, err := c.PodClaimNames(context.Background(), "default", pod)
	require.NoError(t, err)
	require.Len(t, names, 1)
	var cl harness.Claim
	require.NoError(t, c.GetJSON(context.Background(), &cl, "resourceclaim", names[0], "-n", "default"))
	return cl
}

// checkpointHas reports whether the DRA plugin's checkpoint on the node
// names claim uid.
func checkpointHas(t *testing.T, c *harness.Cluster, uid string) bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(c.Node.DRAPluginDir(), "checkpoint.json"))
	require.NoError(t, err)
	return strings.Contains(string(raw), uid)
}

func requireCheckpointHas(t *testing.T, c *harness.Cluster, uid string, want bool) {
	t.Helper()
	require.Equal(t, want, checkpointHas(t, c, uid), "claim %s in the DRA plugin's checkpoint", uid)
}

// nriMetrics reads the DRA pod's NRI plugin metrics.
func nriMetrics(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	return loopbackMetrics(t, c, nriMetricsPort)
}

// loopbackMetrics reads the metrics of one of the DRA pod's containers.
// The e2e DRA pod runs in the host's network namespace (see
// harness.WriteDRAOverlay), and the API server's pod proxy refuses
// loopback pod addresses, so they are read on the host's loopback
// directly.
func loopbackMetrics(t *testing.T, c *harness.Cluster, port int) string {
	t.Helper()
	mustOnePod(t, c, driCDINamespace, draPods)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics", nil)
	require.NoError(t, err)
	rsp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer rsp.Body.Close()
	body, err := io.ReadAll(rsp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, rsp.StatusCode, string(body))
	return string(body)
}

// metricValue returns the sum of the samples of name with the given
// labels (name, value, ...) in a /metrics answer, 0 when absent.
func metricValue(t *testing.T, body, name string, labels ...string) float64 {
	t.Helper()
	m, err := harness.ParseMetrics(body)
	require.NoError(t, err)
	v, _ := m.Sum(name, labels...)
	return v
}

type sample struct {
	at  time.Time
	v   int64
	err error
}

// requireStep runs a subtest the later ones build on and stops the test
// when it fails: the rest would only time out on the same cause.
func requireStep(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

// longestGap is the longest run of samples whose value was below want (or
// failed).
func longestGap(samples []sample, want int64) time.Duration {
	var longest time.Duration
	var from time.Time
	for _, s := range samples {
		low := s.err != nil || s.v < want
		switch {
		case low && from.IsZero():
			from = s.at
		case !low && !from.IsZero():
			if d := s.at.Sub(from); d > longest {
				longest = d
			}
			from = time.Time{}
		}
	}
	if !from.IsZero() && len(samples) > 0 {
		if d := samples[len(samples)-1].at.Sub(from); d > longest {
			longest = d
		}
	}
	return longest
}

func mustOnePod(t *testing.T, c *harness.Cluster, ns, selector string) *harness.Pod {
	t.Helper()
	pods, err := c.Pods(context.Background(), ns, selector)
	require.NoError(t, err)
	require.Len(t, pods, 1, "pods %s in %s", selector, ns)
	return &pods[0]
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// containerState describes a CRI container for failure messages.
func containerState(ctx context.Context, n *harness.Node, id string) string {
	out, err := n.Crictl(ctx, "inspect", "-o", "go-template", "--template", "{{.status.state}} exit={{.status.exitCode}} reason={{.status.reason}} {{.status.message}} log={{.status.logPath}}", id)
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(out)
}

func cdiNames(t *testing.T, n *harness.Node) []string {
	t.Helper()
	names, err := harness.CDINames(n.CDIDir)
	require.NoError(t, err)
	return names
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func allocatable(t *testing.T, n *harness.Node) []string {
	t.Helper()
	ids, err := n.Allocatable(context.Background(), resource)
	require.NoError(t, err)
	return ids
}

// gpuPodPaths runs a pod that requests one GPU and probes paths.
func gpuPodPaths(t *testing.T, n *harness.Node, spec harness.PodSpec, cards []drmtest.GPU, paths []string) (drmtest.GPU, map[string]harness.ProbeResult) {
	t.Helper()
	res := probePod(t, n, spec, paths...)
	return allocatedCard(t, n, spec.Name, cards), res
}

// requireNoContainerHolds checks that no container of the pod but the
// first one was given DRM minor minor (Y's numbers now).
func requireNoContainerHolds(t *testing.T, n *harness.Node, pod, firstID string, minor int) {
	t.Helper()
	ctx := context.Background()
	cs, err := n.Containers(ctx, pod)
	require.NoError(t, err)
	for _, c := range cs {
		if c.ID == firstID {
			continue
		}
		spec, err := n.Inspect(ctx, c.ID)
		require.NoError(t, err)
		for _, d := range spec.Devices {
			require.False(t, d.Major == drmMajor && d.Minor == int64(minor), "container %s of pod %s holds %s %d:%d, another card's node", c.ID, pod, d.Path, d.Major, d.Minor)
		}
		require.Empty(t, spec.AllowRules(drmMajor, int64(minor)), "container %s of pod %s may use c %d:%d", c.ID, pod, drmMajor, minor)
	}
}

// specDefines reports whether our CDI specs define device id.
func specDefines(t *testing.T, n *harness.Node, id string) bool {
	t.Helper()
	return contains(cdiNames(t, n), cdiKind+"="+id)
}

// specNodes returns the device nodes our CDI spec gives device id, path
// -> "major:minor".
func specNodes(t *testing.T, n *harness.Node, id string) map[string]string {
	t.Helper()
	specs, err := harness.ReadCDISpecs(n.CDIDir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, f := range specs {
		for _, d := range f.Devices {
			if f.Kind != cdiKind || d.Name != id {
				continue
			}
			for _, dn := range d.ContainerEdits.DeviceNodes {
				out[dn.Path] = fmt.Sprintf("%d:%d", dn.Major, dn.Minor)
			}
		}
	}
	return out
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("condition not met within %s", timeout)
		case <-t.C:
		}
	}
}

// field returns the rest of the first output line that starts with key
// and a space.
func field(t *testing.T, out, key string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), key+" "); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no %q line in output %q", key, out)
	return ""
}

// Where the kustomize base and the chart put dri-cdi.
const (
	driCDINamespace = "dri-cdi"
	driCDIDaemonSet = "dri-cdi"
	driCDIPods      = "app.kubernetes.io/component=node"
)

// startCluster starts a cluster for one test (startForTest).
func startCluster(t *testing.T, opts harness.ClusterOptions) *harness.Cluster {
	t.Helper()
	return startForTest(t, "cluster", suite.StartCluster, opts)
}

// kubectl runs kubectl and fails the test on error.
func kubectl(t *testing.T, c *harness.Cluster, args ...string) string {
	t.Helper()
	out, err := c.Kubectl(context.Background(), args...)
	require.NoError(t, err)
	return out
}

// apply applies one manifest from stdin.
func apply(t *testing.T, c *harness.Cluster, manifest string) {
	t.Helper()
	_, err := c.KubectlStdin(context.Background(), manifest, "apply", "-f", "-")
	require.NoError(t, err)
}

// mediaServer waits for the Deployment's pod to print its probe and
// returns the pod and what it found.
func mediaServer(t *testing.T, c *harness.Cluster, app string) (*harness.Pod, *harness.MediaReport) {
	t.Helper()
	pod, out, err := c.WaitContainerOutput(context.Background(), "default", "app="+app, "server", harness.ProbeDone, 3*time.Minute)
	require.NoError(t, err)
	t.Logf("%s output:\n%s", pod.Metadata.Name, out)
	rep, err := harness.ParseMedia(out)
	require.NoError(t, err)
	return pod, rep
}

// requireMediaServerWorks checks the seed's shape end to end: the node
// the pod found carries the host's render group (not 0), the dropped
// user is uid 1000 in that group, and its open() reached the driver
// (ENXIO: the device cgroup let it through).
func requireMediaServerWorks(t *testing.T, rep *harness.MediaReport) {
	t.Helper()
	require.Equal(t, "105", rep.GID, "the render node inside the pod must keep the host's render gid (drmtest.RenderGID), not 0")
	requireMediaServerOpens(t, rep)
}

// requireMediaServerOpens checks the part that does not depend on the
// node's group: uid 1000 in the node's group opened it, and the device
// cgroup let it through (ENXIO).
func requireMediaServerOpens(t *testing.T, rep *harness.MediaReport) {
	t.Helper()
	require.Contains(t, rep.ID, "uid=1000(user)", "the server must have dropped to uid 1000")
	require.Regexp(t, regexp.MustCompile(`groups=.*\b`+rep.GID+`\(`), rep.ID, "uid 1000 must have joined the render node's group")
	require.Equal(t, harness.ENXIO, rep.Probe.Errno, "open(%s) as uid 1000: %s", rep.Node, rep.Probe.Message)
}

// probeRunning opens node inside a running container through CRI exec.
func probeRunning(t *testing.T, c *harness.Cluster, containerID, node string) harness.ProbeResult {
	t.Helper()
	return probeRunningOn(t, c.Node, containerID, node)
}

// probeRunningOn opens node inside a running container of node n.
func probeRunningOn(t *testing.T, n *harness.Node, containerID, node string) harness.ProbeResult {
	t.Helper()
	out, err := n.Exec(context.Background(), containerID, "/bin/sh", "-c", harness.ProbeScript(node))
	require.NoError(t, err, out)
	r, err := harness.ParseProbe(out, node)
	require.NoError(t, err)
	return r
}

// documentedMetrics returns the metric names a docs/ page documents.
func documentedMetrics(t *testing.T, page string) map[string]bool {
	t.Helper()
	root, err := harness.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "docs", page))
	require.NoError(t, err)
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`dri_cdi_[a-z0-9_]+`).FindAllString(string(data), -1) {
		names[m] = true
	}
	return names
}

// exposedMetrics returns the dri_cdi_ metric families in a /metrics
// answer.
func exposedMetrics(t *testing.T, body string) map[string]bool {
	t.Helper()
	m, err := harness.ParseMetrics(body)
	require.NoError(t, err)
	return m.Families("dri_cdi_")
}

// waitGone waits until no pod matches selector in ns.
func waitNoPods(t *testing.T, c *harness.Cluster, ns, selector string, timeout time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		pods, err := c.Pods(context.Background(), ns, selector)
		return err == nil && len(pods) == 0
	}, timeout, time.Second, "pods %s in %s must go", selector, ns)
}
