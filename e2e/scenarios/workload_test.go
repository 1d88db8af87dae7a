package scenarios

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// workloadNodes are the runtimes and delivery paths the workload
// scenarios run on: every path on the default containerd (2.4.2), the
// paths k3s 1.33-1.35 use on 2.2, and nri mode on 1.7 (CDI off there).
var workloadNodes = []struct {
	name       string
	containerd string
	delivery   string
	hideCDI    bool
}{
	{"v2.4/cdi-cri", "", harness.DeliveryCDICRI, false},
	{"v2.4/nri", "", harness.DeliveryNRI, true},
	{"v2.4/device-specs", "", harness.DeliveryDeviceSpecs, false},
	{"v2.2/cdi-cri", harness.Containerd22, harness.DeliveryCDICRI, false},
	{"v2.2/nri", harness.Containerd22, harness.DeliveryNRI, true},
	{"v1.7/nri", harness.Containerd17, harness.DeliveryNRI, true},
}

// TestWorkloads runs the pod shapes of real GPU workloads on a one-GPU
// node per runtime and delivery path:
//
//   - root-start-then-drop: a root-started image does what s6-overlay
//     media-server images (pms-docker) do at init: stat the render node's
//     gid, add a group with it and a user in it, drop to uid 1000 with su.
//     The node must show the host's group, the user must end up in it and
//     never in gid 0, and its open must reach the driver (ENXIO);
//   - init container: a regular init container and the app container each
//     request the one GPU (the kubelet reuses the device); both open it and
//     the pod runs;
//   - sidecar: a restartable init container requests the GPU and opens it
//     while the app container runs.
func TestWorkloads(t *testing.T) {
	for _, wn := range workloadNodes {
		t.Run(wn.name, func(t *testing.T) {
			ctx := context.Background()
			cards := []drmtest.GPU{harness.IntelGPU(0)}
			n := startNode(t, harness.NodeOptions{
				Name: "workload-" + strings.NewReplacer("/", "-", ".", "").Replace(wn.name), GPUs: cards,
				Delivery: wn.delivery, NRI: true, HideCDIFromRuntime: wn.hideCDI, Containerd: wn.containerd,
			})
			render := harness.RenderPath(cards[0])

			t.Run("root-start-then-drop", func(t *testing.T) { rootStartThenDrop(t, n, render) })
			t.Run("init container", func(t *testing.T) { initContainerSharesTheGPU(t, n, render, nil) })

			t.Run("sidecar", func(t *testing.T) {
				pod := harness.WorkloadPod{
					Name: "withsidecar",
					InitContainers: []harness.WorkloadContainer{{
						Name: "transcoder", Sidecar: true, Resources: map[string]int64{resource: 1}, Script: harness.ProbeAndWait(render),
					}},
					Containers: []harness.WorkloadContainer{{Name: "app", Script: "echo APP-UP; exec sleep 3600"}},
				}
				createWorkload(t, n, pod)
				out, err := n.WaitContainerOutput(ctx, pod.Name, "transcoder", harness.ProbeDone, 120*time.Second)
				require.NoError(t, err)
				t.Logf("sidecar output:\n%s", out)
				r, err := harness.ParseProbe(out, render)
				require.NoError(t, err)
				require.Equal(t, harness.ENXIO, r.Errno, "sidecar: open %s: %s", render, r.Message)
				_, err = n.WaitContainerOutput(ctx, pod.Name, "app", "APP-UP", 60*time.Second)
				require.NoError(t, err)
			})
		})
	}
}

// rootStartThenDrop runs the root-start-then-drop pod on n's one GPU:
// the node shows the host's group and mode, the user ends up in that
// group and never in gid 0, and its open reaches the driver (ENXIO). It
// returns the container's ID.
func rootStartThenDrop(t *testing.T, n *harness.Node, render string) string {
	t.Helper()
	ctx := context.Background()
	var st unix.Stat_t
	require.NoError(t, unix.Stat(filepath.Join(n.DevRoot, "dri", filepath.Base(render)), &st))
	hostGID := st.Gid
	require.NotZero(t, hostGID, "the fake render node must have a group, as render on a real host")
	hostMode := fmt.Sprintf("%o", st.Mode&0o777)
	pod := harness.WorkloadPod{Name: "plex", Containers: []harness.WorkloadContainer{{
		Name: "pms", Script: harness.RootStartThenDrop(render), Resources: map[string]int64{resource: 1},
	}}}
	createWorkload(t, n, pod)
	out, err := n.WaitContainerOutput(ctx, pod.Name, "pms", harness.ProbeDone, 120*time.Second)
	require.NoError(t, err)
	t.Logf("pod %s output:\n%s", pod.Name, out)

	node := field(t, out, "NODE")
	require.Equal(t, fmt.Sprintf("0:%d %s", hostGID, hostMode), node,
		"a root-started container sees the host node's group and mode")
	require.Equal(t, "1000", field(t, out, "UID"))
	groups := strings.Fields(field(t, out, "GROUPS"))
	require.Contains(t, groups, strconv.Itoa(int(hostGID)), "the dropped user is in the node's group")
	require.NotContains(t, groups, "0", "gid 0 must never be handed to the workload")
	r, err := harness.ParseProbe(out, render)
	require.NoError(t, err)
	require.Equal(t, harness.ENXIO, r.Errno, "uid 1000 after su: open %s: %s", render, r.Message)
	c, err := n.NamedContainer(ctx, pod.Name, "pms")
	require.NoError(t, err)
	return c.ID
}

// initContainerSharesTheGPU runs a pod whose regular init container and
// app container each request n's one GPU (the kubelet reuses the
// device): both open it and the pod goes on to run. check, when set, is
// called with each container's ID once it opened the GPU, init first,
// while the container still runs (the init container waits 5 s for it).
func initContainerSharesTheGPU(t *testing.T, n *harness.Node, render string, check func(t *testing.T, n *harness.Node, containerID string)) {
	t.Helper()
	ctx := context.Background()
	gpu := map[string]int64{resource: 1}
	initScript := harness.ProbeScript(render) + "; echo " + harness.ProbeDone
	if check != nil {
		initScript += "; sleep 5"
	}
	pod := harness.WorkloadPod{
		Name: "withinit",
		InitContainers: []harness.WorkloadContainer{{
			Name: "init", Resources: gpu, Script: initScript,
		}},
		Containers: []harness.WorkloadContainer{{
			Name: "app", Resources: gpu, Script: harness.ProbeAndWait(render),
		}},
	}
	createWorkload(t, n, pod)
	for _, c := range []string{"init", "app"} {
		out, err := n.WaitContainerOutput(ctx, pod.Name, c, harness.ProbeDone, 120*time.Second)
		require.NoError(t, err)
		t.Logf("container %s output:\n%s", c, out)
		r, err := harness.ParseProbe(out, render)
		require.NoError(t, err)
		require.Equal(t, harness.ENXIO, r.Errno, "%s: open %s: %s", c, render, r.Message)
		if check != nil {
			ctr, err := n.NamedContainer(ctx, pod.Name, c)
			require.NoError(t, err)
			check(t, n, ctr.ID)
		}
	}
	st, err := n.WaitPod(ctx, pod.Name, 60*time.Second, func(s harness.PodStatus) bool { return s.Phase == "Running" })
	require.NoError(t, err, "the pod must go on to run its app container")
	t.Logf("pod %s: %s", pod.Name, st.Describe())
}

// createWorkload creates the pod and deletes it when the subtest ends,
// passed or not: the node has one GPU, and the next subtest needs it.
func createWorkload(t *testing.T, n *harness.Node, pod harness.WorkloadPod) {
	t.Helper()
	require.NoError(t, n.CreateWorkload(context.Background(), pod))
	t.Cleanup(func() {
		if err := n.DeletePod(context.Background(), pod.Name); err != nil {
			t.Errorf("delete pod %s: %v", pod.Name, err)
		}
	})
}
