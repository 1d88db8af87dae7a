package scenarios

import (
	"context"
	"encoding/json"
	"os"
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

	t.Run("container annotation through CRI", func(t *testing.T) {
		// A CRI client can set container annotations directly; they reach
		// the NRI plugin exactly like the kubelet's Allocate annotations.
		dir := t.TempDir()
		sandbox := map[string]any{
			"metadata":      map[string]any{"name": "forged-cri", "namespace": "default", "uid": "forged-cri-uid", "attempt": 0},
			"log_directory": dir,
			"linux": map[string]any{
				"cgroup_parent":    "/" + n.CgroupRoot() + "/forged",
				"security_context": map[string]any{"namespace_options": map[string]any{"network": 2, "pid": 1, "ipc": 0}},
			},
		}
		ctr := map[string]any{
			"metadata":    map[string]any{"name": harness.ContainerName, "attempt": 0},
			"image":       map[string]any{"image": harness.BusyboxImage},
			"command":     []string{"/bin/sh", "-c", harness.ProbeAndWait(harness.RenderPath(card))},
			"log_path":    "main.log",
			"annotations": map[string]string{key: value},
			"mounts":      []any{map[string]any{"container_path": "/dev/dri", "host_path": filepath.Join(n.DevRoot, "dri")}},
			"linux":       map[string]any{},
		}
		sbFile, ctrFile := filepath.Join(dir, "sandbox.json"), filepath.Join(dir, "container.json")
		writeJSON(t, sbFile, sandbox)
		writeJSON(t, ctrFile, ctr)

		out, err := n.Crictl(ctx, "runp", sbFile)
		require.NoError(t, err, out)
		podID := strings.TrimSpace(out)
		t.Cleanup(func() {
			_, _ = n.Crictl(ctx, "stopp", podID)
			_, _ = n.Crictl(ctx, "rmp", "-f", podID)
		})
		out, err = n.Crictl(ctx, "create", podID, ctrFile, sbFile)
		if err != nil {
			// Failing the container is an acceptable answer to a claim
			// that cannot be confirmed.
			t.Logf("the forged container was refused: %v", err)
			require.NotContains(t, n.LogOf("nri"), "panic")
			return
		}
		ctrID := strings.TrimSpace(out)
		spec, err := n.Inspect(ctx, ctrID)
		require.NoError(t, err)
		requireNoDRMDevice(t, spec)
		out, err = n.Crictl(ctx, "start", ctrID)
		require.NoError(t, err, out)
		var logs string
		require.Eventually(t, func() bool {
			logs, _ = n.Logs(ctx, ctrID)
			return strings.Contains(logs, harness.ProbeDone)
		}, 60*time.Second, 250*time.Millisecond, "no probe output from the forged container")
		t.Logf("forged container output:\n%s", logs)
		r, err := harness.ParseProbe(logs, harness.RenderPath(card))
		require.NoError(t, err)
		require.Equal(t, harness.EPERM, r.Errno, "open %s: %s", r.Path, r.Message)
	})
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}
