package scenarios

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestForgedAnnotation gives containers the allocation annotation without
// an allocation. The NRI plugin must trust only the kubelet's PodResources
// API, so none of them may reach the device. Both containers see the host
// node through a hostPath: a wrongly added cgroup rule would turn their
// EPERM into ENXIO.
func TestForgedAnnotation(t *testing.T) {
	ctx := context.Background()
	card := harness.IntelGPU(0)
	cards := []drmtest.GPU{card}
	n := startNode(t, harness.NodeOptions{Name: "forged", GPUs: cards, Delivery: harness.DeliveryNRI, NRI: true, HideCDIFromRuntime: true})
	_, err := n.WaitAllocatable(ctx, resource, 1, 90*time.Second)
	require.NoError(t, err)
	key, value := alloc.Annotation(resource, []string{card.ID()})

	t.Run("pod annotation", func(t *testing.T) {
		res := probePod(t, n, harness.PodSpec{Name: "forged-pod", HostPathDRI: true, Annotations: map[string]string{key: value}}, harness.RenderPath(card))
		r := res[harness.RenderPath(card)]
		require.Equal(t, harness.EPERM, r.Errno, "open %s: %s", r.Path, r.Message)
		c, err := n.PodContainer(ctx, "forged-pod")
		require.NoError(t, err)
		spec, err := n.Inspect(ctx, c.ID)
		require.NoError(t, err)
		requireNoDRMDevice(t, spec)
	})

	t.Run("sibling container claims the allocated card through CRI", func(t *testing.T) {
		// A CRI client can set container annotations directly; they reach
		// the NRI plugin exactly like the kubelet's Allocate annotations.
		// The intruder joins a pod whose main container holds the card and
		// claims that card: authorization is per container, so it must get
		// nothing. It carries the kubelet's labels of that pod, or the
		// kubelet would remove it as an orphan before it ran.
		holder := harness.PodSpec{Name: "holder", Resources: map[string]int64{resource: 1}, Script: harness.ProbeAndWait(harness.RenderPath(card))}
		require.NoError(t, n.CreatePod(ctx, holder))
		out, err := n.WaitOutput(ctx, holder.Name, harness.ProbeDone, 120*time.Second)
		require.NoError(t, err)
		require.Equal(t, harness.ENXIO, parseProbes(t, out, harness.RenderPath(card))[harness.RenderPath(card)].Errno, "the holder must have the card")
		main, err := n.PodContainer(ctx, holder.Name)
		require.NoError(t, err)
		uid, err := n.Crictl(ctx, "inspectp", "-o", "go-template", "--template", "{{.status.metadata.uid}}", main.PodID)
		require.NoError(t, err)
		uid = strings.TrimSpace(uid)
		require.NotEmpty(t, uid)
		// The pod's cgroup, so that teardown finds the intruder.
		cgroupParent, err := n.Crictl(ctx, "inspectp", "-o", "go-template", "--template", "{{.info.config.linux.cgroup_parent}}", main.PodID)
		require.NoError(t, err)
		cgroupParent = strings.TrimSpace(cgroupParent)
		require.True(t, strings.HasPrefix(cgroupParent, "/"+n.CgroupRoot()+"/"), "pod cgroup %q", cgroupParent)

		dir := t.TempDir()
		sandbox := map[string]any{
			"metadata":      map[string]any{"name": holder.FullName(), "namespace": "default", "uid": uid},
			"log_directory": dir,
			"linux": map[string]any{
				"cgroup_parent":    cgroupParent,
				"security_context": map[string]any{"namespace_options": map[string]any{"network": 2}},
			},
		}
		intruder := map[string]any{
			"metadata":    map[string]any{"name": "intruder"},
			"image":       map[string]any{"image": harness.BusyboxImage},
			"command":     []string{"/bin/sh", "-c", harness.ProbeAndWait(harness.RenderPath(card))},
			"log_path":    "intruder.log",
			"annotations": map[string]string{key: value},
			"labels": map[string]string{
				"io.kubernetes.pod.name":       holder.FullName(),
				"io.kubernetes.pod.namespace":  "default",
				"io.kubernetes.pod.uid":        uid,
				"io.kubernetes.container.name": "intruder",
			},
			"mounts": []any{map[string]any{"container_path": "/dev/dri", "host_path": filepath.Join(n.DevRoot, "dri")}},
			"linux":  map[string]any{},
		}
		sbFile, ctrFile := filepath.Join(dir, "sandbox.json"), filepath.Join(dir, "container.json")
		writeJSON(t, sbFile, sandbox)
		writeJSON(t, ctrFile, intruder)

		out, err = n.Crictl(ctx, "create", main.PodID, ctrFile, sbFile)
		if err != nil {
			// Failing the container is an acceptable answer to a claim
			// the kubelet does not back.
			t.Logf("the intruder was refused: %v", err)
			return
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
		r, err := harness.ParseProbe(logs, harness.RenderPath(card))
		require.NoError(t, err)
		require.Equal(t, harness.EPERM, r.Errno, "open %s: %s", r.Path, r.Message)
	})
}
