package scenarios

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/dmem"
	"github.com/dri-cdi/dri-cdi/pkg/dracheckpoint"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// memoryDmemCapacity gives TestClusterDRAMemory's two fake cards dmem
// regions, as a kernel with dmem lists them: the first a 4 GiB region,
// the second two regions of 8 GiB together (an xe card with two tiles).
// The DRA plugin reads it instead of the host's cgroups; the NRI plugin
// reads the host's, which have no dmem (cgroup v1).
const memoryDmemCapacity = `drm/0000:00:02.0/vram 4294967296
drm/0000:00:03.0/vram0 6442450944
drm/0000:00:03.0/vram1 2147483648
`

// memoryTemplate is a ResourceClaimTemplate for one share with amount
// of device memory.
func memoryTemplate(name, amount string) string {
	return `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: ` + name + `
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.dri-cdi.dev
          capacity:
            requests:
              memory: ` + amount + "\n"
}

// TestClusterDRAMemory: shared cards with dmem regions publish their
// memory, the scheduler places a claim for an amount of memory only on a
// card with that much left, the plugin records the amount, and on this
// node without dmem (cgroup v1) the container starts with no device
// memory limit, the reason counted by the NRI plugin. The subtests run
// in order on one cluster.
func TestClusterDRAMemory(t *testing.T) {
	testClusterDRAMemory(t, harness.ClusterOptions{Name: "memory"}, dmem.ReasonCgroupV1)
}

// TestClusterDRAMemoryCgroupV2 is TestClusterDRAMemory on a node whose
// kubelet, containerd and runc run on cgroup v2 (the v2 rig), where the
// NRI plugin sees a cgroup2 tree without the dmem controller: the
// container still starts, with nothing set, and the reason counted is
// the missing controller. A limit that runc could not write would fail
// the container instead.
func TestClusterDRAMemoryCgroupV2(t *testing.T) {
	testClusterDRAMemory(t, harness.ClusterOptions{Name: "memory-v2", CgroupV2: true}, dmem.ReasonNoController)
}

// testClusterDRAMemory runs the memory scenario on a cluster of opts;
// unenforceable is the reason the NRI plugin must count for each limit
// it cannot set on that node.
func testClusterDRAMemory(t *testing.T, opts harness.ClusterOptions, unenforceable string) {
	ctx := context.Background()
	small, big := harness.IntelGPU(0), harness.IntelGPU(1)
	opts.GPUs = []drmtest.GPU{small, big}
	c := startCluster(t, opts)
	renders := []string{harness.RenderPath(small), harness.RenderPath(big)}

	requireStep(t, "DRAOverlayWithDmemRegions", func(t *testing.T) {
		applyDRAOverlay(t, c, harness.OverlayOptions{Config: sharesConfig, DmemCapacity: memoryDmemCapacity})
	})

	requireStep(t, "SlicePublishesEachCardsMemory", func(t *testing.T) {
		devs := waitSlice(t, c, 2)
		require.Equal(t, map[string]string{"shares": "2", "memory": "4Gi"}, sliceDevice(t, devs, small).Capacity)
		require.Equal(t, map[string]string{"shares": "2", "memory": "8Gi"}, sliceDevice(t, devs, big).Capacity)
	})

	var bigClaim harness.Claim
	requireStep(t, "MemoryClaimsGoWhereTheMemoryIs", func(t *testing.T) {
		apply(t, c, memoryTemplate("gpu-6gi", "6Gi"))
		apply(t, c, memoryTemplate("gpu-3gi", "3Gi"))
		devs := waitSlice(t, c, 2)

		// 6 GiB fits only the 8 GiB card.
		apply(t, c, harness.ClaimPod("mem-6gi", harness.ClaimRef{Template: "gpu-6gi"}, renders...))
		res := claimPodProbes(t, c, "mem-6gi", renders...)
		require.Equal(t, harness.ENXIO, res[harness.RenderPath(big)].Errno, "mem-6gi opens the big card: %s", res[harness.RenderPath(big)].Message)
		bigClaim = podClaim(t, c, "mem-6gi")
		require.Equal(t, []string{sliceDevice(t, devs, big).Name}, bigClaim.Devices())
		r := bigClaim.Status.Allocation.Devices.Results[0]
		require.Equal(t, map[string]string{"shares": "1", "memory": "6Gi"}, r.ConsumedCapacity)

		// 3 GiB: the big card has a free share but 2 GiB left; the small
		// card has 4.
		apply(t, c, harness.ClaimPod("mem-3gi", harness.ClaimRef{Template: "gpu-3gi"}, renders...))
		res = claimPodProbes(t, c, "mem-3gi", renders...)
		require.Equal(t, harness.ENXIO, res[harness.RenderPath(small)].Errno, "mem-3gi opens the small card: %s", res[harness.RenderPath(small)].Message)
		smallClaim := podClaim(t, c, "mem-3gi")
		require.Equal(t, []string{sliceDevice(t, devs, small).Name}, smallClaim.Devices())

		// Another 3 GiB fits neither card, though both have a free share.
		apply(t, c, harness.ClaimPod("mem-3gi-more", harness.ClaimRef{Template: "gpu-3gi"}, renders...))
		requireUnschedulable(t, c, "mem-3gi-more", "cannot allocate all claims")
		kubectl(t, c, "delete", "pod", "mem-3gi-more", "--wait=true")
	})

	requireStep(t, "PluginRecordsTheAmount", func(t *testing.T) {
		claims, err := dracheckpoint.Load(filepath.Join(c.Node.DRAPluginDir(), dracheckpoint.File))
		require.NoError(t, err)
		pc, ok := claims[bigClaim.Metadata.UID]
		require.True(t, ok, "the 6 GiB claim is prepared")
		require.Len(t, pc.Devices, 1)
		require.Equal(t, int64(6<<30), pc.Devices[0].Memory)
		require.NotEmpty(t, pc.Devices[0].ShareID)
	})

	requireStep(t, "NoDmemHereTheContainerStartsWithoutALimit", func(t *testing.T) {
		require.Equal(t, opts.CgroupV2, c.Node.CgroupV2())
		for _, p := range []string{"mem-6gi", "mem-3gi"} {
			id := mustOnePod(t, c, "default", "app="+p).ContainerID("app")
			spec, err := c.Node.Inspect(ctx, id)
			require.NoError(t, err)
			var raw struct {
				Info struct {
					RuntimeSpec struct {
						Linux struct {
							Resources struct {
								Unified map[string]string `json:"unified"`
							} `json:"resources"`
						} `json:"linux"`
					} `json:"runtimeSpec"`
				} `json:"info"`
			}
			require.NoError(t, json.Unmarshal([]byte(spec.Raw), &raw))
			require.NotContains(t, raw.Info.RuntimeSpec.Linux.Resources.Unified, "dmem.max", "%s: no device memory limit without dmem", p)
		}
		// The NRI plugin found both amounts in the checkpoint and counted
		// why it set nothing: cgroup v1, or a v2 tree without dmem.
		m := nriMetrics(t, c)
		require.Equal(t, 2.0, metricValue(t, m, "dri_cdi_nri_memory_limits_unenforceable_total", "reason", unenforceable))
		require.Zero(t, metricValue(t, m, "dri_cdi_nri_memory_limits_total"))
		for _, p := range []string{"mem-6gi", "mem-3gi"} {
			kubectl(t, c, "delete", "pod", p, "--wait=true")
		}
	})
}
