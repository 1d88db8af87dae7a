package scenarios

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestCgroupV2 runs the node scenarios on a cgroup v2 hierarchy, where
// the device cgroup is an eBPF program that runc attaches to each
// container's cgroup, and whose deny-all program is what returned the
// seed's EPERM. Each node is the v2 rig (harness/cgroupv2.go): the real
// kubelet, containerd 2.4 and runc in a mount and cgroup namespace whose
// /sys/fs/cgroup is the kernel's one cgroup2 tree. Every container
// checked here must also show that a v2 program enforces its devices:
// `bpftool cgroup show <its cgroup>` lists a cgroup_device program, whose
// instructions allow c 226:N for a container that reached its card and
// no c 226:N for the hostPath one; and its v1 devices cgroup allows
// everything, so a denial can only be the program's.
//
//   - v1 control: the same check on a container of a v1 node finds no
//     program, so the check tells the two apart;
//   - on a cdi-cri node: a hostPath /dev/dri gives EPERM; a GPU pod gets
//     ENXIO with exactly its card's nodes and rules, and on this node
//     without the dmem controller no dmem setting; the
//     root-start-then-drop workload and an init container sharing the
//     GPU with its app container both get ENXIO;
//   - dri-cdi doctor run inside the rig's namespaces, where
//     /sys/fs/cgroup is a sub-tree as in a container, reports cgroup v2
//     and that it cannot see the root-only dmem.capacity;
//   - nri mode on a runtime whose CDI cannot see our specs: ENXIO,
//     injected by the NRI plugin alone;
//   - device-specs mode: ENXIO through the kubelet's DeviceSpecs;
//   - renumbering: TestRenumberAfterUnbind's whole sequence.
func TestCgroupV2(t *testing.T) {
	t.Run("v1 control: a v1-managed container has no cgroup_device program", func(t *testing.T) {
		card := harness.IntelGPU(0)
		n := startNode(t, harness.NodeOptions{Name: "v1-control", GPUs: []drmtest.GPU{card}})
		require.False(t, n.CgroupV2())
		res := probePod(t, n, harness.PodSpec{Name: "hostpath", HostPathDRI: true}, harness.RenderPath(card))
		require.Equal(t, harness.EPERM, res[harness.RenderPath(card)].Errno, "the v1 devices controller denies a hostPath too")
		c, err := n.PodContainer(context.Background(), "hostpath")
		require.NoError(t, err)
		f, err := n.ContainerDeviceFilter(context.Background(), c.ID)
		require.NoError(t, err, "a v1 container on a hybrid host also has a cgroup in the v2 tree")
		require.Empty(t, f.Programs, "the v1 devices controller, not a v2 program, enforces this container (%s lists %+v)", f.Cgroup, f.Listing)
	})

	t.Run("cdi-cri", func(t *testing.T) {
		cards := []drmtest.GPU{harness.IntelGPU(0)}
		render := harness.RenderPath(cards[0])
		n := startNode(t, harness.NodeOptions{Name: "v2-cdicri", GPUs: cards, Delivery: harness.DeliveryCDICRI, NRI: true, CgroupV2: true})

		t.Run("hostPath gives EPERM", func(t *testing.T) {
			deleteWhenDone(t, n, "hostpath")
			res := probePod(t, n, harness.PodSpec{Name: "hostpath", HostPathDRI: true}, render)
			require.Equal(t, harness.EPERM, res[render].Errno, "open %s through a hostPath: %s", render, res[render].Message)
			f := requireV2DeviceFilter(t, n, podContainerID(t, n, "hostpath"))
			require.False(t, f.AllowsCharMajor(drmMajor), "a hostPath adds no rule: the program must allow no c %d:N (it allows c %v)", drmMajor, f.AllowedChar)
		})
		t.Run("GPU pod gets ENXIO", func(t *testing.T) {
			deleteWhenDone(t, n, "gpu")
			card, res := gpuPod(t, n, harness.PodSpec{Name: "gpu"}, cards)
			requireGranted(t, res, card, cards)
			spec := requireSpecHasCard(t, n, "gpu", card)
			require.Contains(t, spec.CDIDevices, cdiName(card))
			f := requireV2DeviceFilter(t, n, podContainerID(t, n, "gpu"))
			require.True(t, f.AllowsChar(drmMajor, int64(card.Render)), "the program must allow the render node c %d:%d (it allows c %v)", drmMajor, card.Render, f.AllowedChar)
			require.True(t, f.AllowsChar(drmMajor, int64(card.Card)), "the program must allow the card node c %d:%d (it allows c %v)", drmMajor, card.Card, f.AllowedChar)
			// A node without the dmem controller: nothing asks for a
			// device-memory limit, and the container started (above).
			require.NotContains(t, n.CgroupV2Controllers(), "dmem")
			require.NotContains(t, spec.Raw, `"dmem.`, "no dmem.* setting in the container's spec")
		})
		t.Run("doctor in a private cgroup namespace", func(t *testing.T) {
			// dri-cdi doctor where /sys/fs/cgroup is a sub-tree of the
			// cgroup2 tree, as in a container: it knows the version and
			// says it cannot see the root-only dmem.capacity.
			rep, err := n.DoctorInRig(context.Background())
			require.NoError(t, err)
			got := map[string]harness.DoctorResult{}
			for _, r := range rep.Results {
				got[r.Name] = r
			}
			t.Logf("doctor in the rig: cgroup %+v; cgroup.dmem %+v", got["cgroup"], got["cgroup.dmem"])
			require.Equal(t, "OK", got["cgroup"].Status)
			require.Contains(t, got["cgroup"].Message, "cgroup v2")
			require.Equal(t, "WARN", got["cgroup.dmem"].Status, "this kernel has no dmem, and the sub-tree cannot tell")
			require.Contains(t, got["cgroup.dmem"].Message, "dmem.capacity is not visible")
		})
		t.Run("root-start-then-drop", func(t *testing.T) {
			requireV2AllowsGPU(t, n, rootStartThenDrop(t, n, render))
		})
		t.Run("init container", func(t *testing.T) {
			initContainerSharesTheGPU(t, n, render, requireV2AllowsGPU)
		})
	})

	t.Run("nri", func(t *testing.T) {
		cards := []drmtest.GPU{harness.IntelGPU(0)}
		n := startNode(t, harness.NodeOptions{Name: "v2-nri", GPUs: cards, Delivery: harness.DeliveryNRI, NRI: true, HideCDIFromRuntime: true, CgroupV2: true})
		card, res := gpuPod(t, n, harness.PodSpec{Name: "gpu"}, cards)
		requireGranted(t, res, card, cards)
		spec := requireSpecHasCard(t, n, "gpu", card)
		require.Empty(t, spec.CDIDevices, "nri mode must not hand CDI names to the runtime")
		requireV2AllowsGPU(t, n, podContainerID(t, n, "gpu"))
	})

	t.Run("device-specs", func(t *testing.T) {
		cards := []drmtest.GPU{harness.IntelGPU(0)}
		n := startNode(t, harness.NodeOptions{Name: "v2-devspecs", GPUs: cards, Delivery: harness.DeliveryDeviceSpecs, CgroupV2: true})
		card, res := gpuPod(t, n, harness.PodSpec{Name: "gpu"}, cards)
		requireGranted(t, res, card, cards)
		spec, err := n.Inspect(context.Background(), podContainerID(t, n, "gpu"))
		require.NoError(t, err)
		require.Empty(t, spec.CDIDevices, "device-specs hands out no CDI names")
		require.Len(t, spec.DevicesAt(harness.RenderPath(card)), 1, "the render node in linux.devices")
		require.NotEmpty(t, spec.AllowRules(drmMajor, int64(card.Render)), "a cgroup rule for the render node")
		requireV2AllowsGPU(t, n, podContainerID(t, n, "gpu"))
	})

	t.Run("renumber after unbind", func(t *testing.T) {
		renumberAfterUnbind(t, "v2-renumber", true, requireV2AllowsGPU)
	})
}

// requireV2DeviceFilter checks that a cgroup v2 program enforces the
// container's device access: its cgroup, on the node's v2 rig, has a
// cgroup_device program attached, and the v1 devices controller (on this
// hybrid host) allows everything, so any denial is the program's.
func requireV2DeviceFilter(t *testing.T, n *harness.Node, containerID string) *harness.DeviceFilter {
	t.Helper()
	require.True(t, n.CgroupV2(), "node is not on the cgroup v2 rig")
	f, err := n.ContainerDeviceFilter(context.Background(), containerID)
	require.NoError(t, err)
	require.NotEmpty(t, f.Programs, "container %s: no %s program on its cgroup %s (bpftool lists %+v)", containerID, harness.AttachCgroupDevice, f.Cgroup, f.Listing)
	if f.V1Devices != "" {
		require.Equal(t, "a *:* rwm", f.V1Devices, "container %s: its v1 devices cgroup must allow everything, or it, not the v2 program, may be what denies", containerID)
	}
	t.Logf("container %s: cgroup %s, %s program(s) %+v allowing c %v; v1 devices.list %q", containerID, f.Cgroup, harness.AttachCgroupDevice, f.Programs, f.AllowedChar, f.V1Devices)
	return f
}

// requireV2AllowsGPU is requireV2DeviceFilter for a container that
// reached its card: the program allows a DRM device (c 226:N).
func requireV2AllowsGPU(t *testing.T, n *harness.Node, containerID string) {
	t.Helper()
	f := requireV2DeviceFilter(t, n, containerID)
	require.True(t, f.AllowsCharMajor(drmMajor), "container %s: its device program allows no c %d:N (it allows c %v)", containerID, drmMajor, f.AllowedChar)
}

func podContainerID(t *testing.T, n *harness.Node, pod string) string {
	t.Helper()
	c, err := n.PodContainer(context.Background(), pod)
	require.NoError(t, err)
	return c.ID
}

// deleteWhenDone deletes the pod when the subtest ends, passed or not:
// the node has one GPU, and the next subtest needs it.
func deleteWhenDone(t *testing.T, n *harness.Node, pod string) {
	t.Helper()
	t.Cleanup(func() {
		if err := n.DeletePod(context.Background(), pod); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("delete pod %s: %v", pod, err)
		}
	})
}
