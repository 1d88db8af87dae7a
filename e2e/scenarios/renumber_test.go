package scenarios

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// unavailableMsg is part of dri-cdi-nri's error for a card that is gone.
const unavailableMsg = "is not bound to a driver or its device nodes are gone"

// renumberPaths are every render path the two cards can have in the
// renumbering sequences; the holder probes all of them.
var renumberPaths = []string{"/dev/dri/renderD128", "/dev/dri/renderD129"}

// heldCard is a node with two Intel cards and a pod holding one of them.
type heldCard struct {
	node   *harness.Node
	holder harness.PodSpec
	// x is the card the kubelet allocated to the holder, y the other.
	x, y drmtest.GPU
	// out is the holder's first probe output.
	out string
}

// holdOneOfTwo starts a node with two Intel cards (cdi-cri, NRI on; on
// the cgroup v2 rig when cgroupV2) and a restartPolicy Always pod
// "holder" that requests one GPU and probes renumberPaths.
func holdOneOfTwo(t *testing.T, name string, cgroupV2 bool) heldCard {
	t.Helper()
	ctx := context.Background()
	cards := []drmtest.GPU{harness.IntelGPU(0), harness.IntelGPU(1)}
	h := heldCard{node: startNode(t, harness.NodeOptions{Name: name, GPUs: cards, Delivery: harness.DeliveryCDICRI, NRI: true, CgroupV2: cgroupV2})}
	_, err := h.node.WaitAllocatable(ctx, resource, 2, 90*time.Second)
	require.NoError(t, err)
	h.holder = harness.PodSpec{Name: "holder", RestartPolicy: "Always", Resources: map[string]int64{resource: 1},
		Script: harness.ProbeAndWait(renumberPaths...)}
	require.NoError(t, h.node.CreatePod(ctx, h.holder))
	h.out, err = h.node.WaitOutput(ctx, h.holder.Name, harness.ProbeDone, 120*time.Second)
	require.NoError(t, err)
	h.x = allocatedCard(t, h.node, h.holder.Name, cards)
	h.y = cards[0]
	if h.y.ID() == h.x.ID() {
		h.y = cards[1]
	}
	return h
}

// TestRenumberAfterUnbind is the sequence of a driver unbind followed by
// another card taking the freed minors, on a real kubelet, containerd and
// runc:
//
//  1. a restartPolicy Always pod holds card X;
//  2. X's driver unbinds (its PCI device stays, its DRM minors go): X
//     turns Unhealthy;
//  3. card Y re-probes and takes the lowest free minors, X's old card
//     and render node numbers;
//  4. the pod's container is stopped; the kubelet restarts it with its
//     cached Allocate response (no Allocate call), so X's CDI name is
//     resolved again.
//
// The restarted container must never hold Y's numbers: it fails with
// dri-cdi-nri's error naming X. Y stays allocatable, and a second pod
// gets Y at its new numbers. When X comes back with its own (new)
// numbers it turns Healthy, and the held pod's container starts with X's
// nodes.
func TestRenumberAfterUnbind(t *testing.T) {
	renumberAfterUnbind(t, "renumber", false, nil)
}

// renumberAfterUnbind is TestRenumberAfterUnbind on a node named name, on
// the cgroup v2 rig when cgroupV2. reached, when set, is also called for
// each container that reached its card (ENXIO).
func renumberAfterUnbind(t *testing.T, name string, cgroupV2 bool, reached func(t *testing.T, n *harness.Node, containerID string)) {
	ctx := context.Background()
	if reached == nil {
		reached = func(*testing.T, *harness.Node, string) {}
	}
	h := holdOneOfTwo(t, name, cgroupV2)
	n, holder, x, y, out := h.node, h.holder, h.x, h.y, h.out
	res := parseProbes(t, out, renumberPaths...)
	require.Equal(t, harness.ENXIO, res[harness.RenderPath(x)].Errno, "holder must reach X %s first", x.ID())
	first, err := n.PodContainer(ctx, holder.Name)
	require.NoError(t, err)
	reached(t, n, first.ID)
	t.Logf("holder holds X=%s (card%d, renderD%d); Y=%s (card%d, renderD%d)", x.ID(), x.Card, x.Render, y.ID(), y.Card, y.Render)

	// 2. X unbinds: Unhealthy, and its spec holds no device node.
	require.NoError(t, n.Tree.Unbind(x.ID()))
	require.NoError(t, n.WaitDeviceHealth(ctx, resource, x.ID(), pluginapi.Unhealthy, 60*time.Second))
	require.Eventually(t, func() bool { return specDefines(t, n, x.ID()) && len(specNodes(t, n, x.ID())) == 0 },
		30*time.Second, 250*time.Millisecond, "X's spec must keep its name and hold no device node")

	// 3. Y takes X's old numbers.
	require.NoError(t, n.Tree.Renumber(y.ID(), x.Card, x.Render))
	yNow := y.WithNodes(x.Card, x.Render)
	require.Eventually(t, func() bool {
		return specNodes(t, n, y.ID())[harness.RenderPath(yNow)] == fmt.Sprintf("%d:%d", drmMajor, x.Render)
	}, 30*time.Second, 250*time.Millisecond, "Y's spec must follow its new numbers")
	require.NoError(t, n.WaitDeviceHealth(ctx, resource, y.ID(), pluginapi.Healthy, 60*time.Second))
	require.NoError(t, n.WaitDeviceHealth(ctx, resource, x.ID(), pluginapi.Unhealthy, 10*time.Second))
	t.Logf("CDI specs now: X %v, Y %v", specNodes(t, n, x.ID()), specNodes(t, n, y.ID()))

	// 4. The holder's container dies; the kubelet restarts it from its
	// cached allocation of X.
	require.NoError(t, n.StopContainer(ctx, first.ID))
	st, err := n.WaitPod(ctx, holder.Name, 90*time.Second, harness.WaitingWith(unavailableMsg))
	require.NoError(t, err, "the restarted container must fail with dri-cdi's error for X")
	t.Logf("holder after the restart: %s", st.Describe())
	require.Contains(t, st.Describe(), x.ID(), "the error must name X")
	require.GreaterOrEqual(t, n.CountLog("nri", unavailableMsg, x.ID()), 1, "dri-cdi-nri must log why")
	requireNoContainerHolds(t, n, holder.Name, first.ID, x.Render)

	// Y is unaffected: a second pod gets Y, at its new numbers.
	second := harness.PodSpec{Name: "second", Resources: map[string]int64{resource: 1}}
	got, res2 := gpuPodPaths(t, n, second, []drmtest.GPU{x, yNow}, renumberPaths)
	require.Equal(t, y.ID(), got.ID(), "only Y is healthy")
	require.Equal(t, harness.ENXIO, res2[harness.RenderPath(yNow)].Errno, "second pod must reach Y at %s", harness.RenderPath(yNow))
	requireSpecHasCard(t, n, second.Name, yNow)
	secondCtr, err := n.PodContainer(ctx, second.Name)
	require.NoError(t, err)
	reached(t, n, secondCtr.ID)
	// The holder still did not get Y's node in the meantime.
	requireNoContainerHolds(t, n, holder.Name, first.ID, x.Render)

	// X comes back with its own numbers (the ones Y left): Healthy again,
	// and the holder's container starts with X's nodes.
	xNow := x.WithNodes(y.Card, y.Render)
	require.NoError(t, n.Tree.RebindAs(x.ID(), xNow.Card, xNow.Render))
	require.NoError(t, n.WaitDeviceHealth(ctx, resource, x.ID(), pluginapi.Healthy, 60*time.Second))
	var outAgain, againID string
	err = waitFor(ctx, 180*time.Second, func() bool {
		c, err := n.PodContainer(ctx, holder.Name)
		if err != nil || c.ID == first.ID {
			return false
		}
		o, err := n.Logs(ctx, c.ID)
		outAgain, againID = o, c.ID
		return err == nil && strings.Contains(o, harness.ProbeDone)
	})
	require.NoError(t, err, "the holder's container must start once X is back")
	t.Logf("holder once X is back at card%d/renderD%d:\n%s", xNow.Card, xNow.Render, outAgain)
	again := parseProbes(t, outAgain, renumberPaths...)
	require.Equal(t, harness.ENXIO, again[harness.RenderPath(xNow)].Errno, "holder must reach X at %s", harness.RenderPath(xNow))
	o := again[harness.RenderPath(yNow)]
	require.NotContains(t, []string{harness.ENXIO, harness.Opened}, o.Errno, "holder must not reach Y's %s: %s", o.Path, o.Message)
	requireSpecHasCard(t, n, holder.Name, xNow)
	reached(t, n, againID)
}

// mismatchMsg is part of dri-cdi-nri's error for a node that is not, on
// the host, the device the spec says.
const mismatchMsg = "device node does not match the host"

// TestRenumberWhileAgentDown is the same renumbering while the agent is
// not running (crashed), so the CDI specs still hold X's old numbers,
// which Y owns now:
//
//  1. a restartPolicy Always pod holds X; the agent is killed;
//  2. X unbinds and Y takes X's old minors;
//  3. the pod's container restarts: containerd resolves X's stale spec,
//     and dri-cdi-nri's host check fails it (X's by-path link is gone);
//  4. the agent starts again: it removes its dead socket, finds X
//     allocated in the kubelet's checkpoint but unbound, lists it
//     Unhealthy with a spec without nodes; the next retry fails with the
//     card-unavailable error.
func TestRenumberWhileAgentDown(t *testing.T) {
	ctx := context.Background()
	h := holdOneOfTwo(t, "renumber-agent-down", false)
	n, holder, x, y := h.node, h.holder, h.x, h.y
	first, err := n.PodContainer(ctx, holder.Name)
	require.NoError(t, err)
	staleX := specNodes(t, n, x.ID())
	require.NotEmpty(t, staleX)

	// 1-2. The agent is gone while X unbinds and Y takes X's numbers.
	n.KillAgent()
	require.NoError(t, n.Tree.Unbind(x.ID()))
	require.NoError(t, n.Tree.Renumber(y.ID(), x.Card, x.Render))
	require.Equal(t, staleX, specNodes(t, n, x.ID()), "with the agent down, X's spec still holds X's old numbers")

	// 3. The restart resolves the stale spec; the host check refuses it.
	require.NoError(t, n.StopContainer(ctx, first.ID))
	st, err := n.WaitPod(ctx, holder.Name, 90*time.Second, harness.WaitingWith(mismatchMsg))
	require.NoError(t, err, "the restarted container must fail dri-cdi-nri's host check")
	t.Logf("holder with the agent down: %s", st.Describe())
	require.Contains(t, st.Describe(), x.ID())
	requireNoContainerHolds(t, n, holder.Name, first.ID, x.Render)

	// 4. The agent comes back: X Unhealthy from the kubelet's checkpoint,
	// its spec without nodes; Y Healthy at its new numbers.
	require.NoError(t, n.StartAgent(ctx, harness.DeliveryCDICRI))
	require.NoError(t, n.WaitDeviceHealth(ctx, resource, x.ID(), pluginapi.Unhealthy, 60*time.Second))
	require.NoError(t, n.WaitDeviceHealth(ctx, resource, y.ID(), pluginapi.Healthy, 60*time.Second))
	require.Eventually(t, func() bool { return specDefines(t, n, x.ID()) && len(specNodes(t, n, x.ID())) == 0 },
		30*time.Second, 250*time.Millisecond, "X's spec must keep its name and hold no device node")
	require.GreaterOrEqual(t, n.CountLog("agent", "removed a socket a previous agent left behind"), 1, "the dead agent's socket must be removed")
	_, err = n.WaitPod(ctx, holder.Name, 180*time.Second, harness.WaitingWith(unavailableMsg))
	require.NoError(t, err, "the next retry must fail with the card-unavailable error")
	requireNoContainerHolds(t, n, holder.Name, first.ID, x.Render)
}
