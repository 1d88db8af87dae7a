package scenarios

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
)

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
	out, err := c.Node.Exec(context.Background(), containerID, "/bin/sh", "-c", harness.ProbeScript(node))
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
