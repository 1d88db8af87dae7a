package scenarios

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// The soak's settings, from the environment `make soak` and `make e2e`
// pass: SOAK_DURATION is the churn time over both nodes (2m in
// `make e2e`, 10m in `make soak`), SOAK_SEED replays a run.
const (
	envSoakDuration     = "DRI_CDI_SOAK_DURATION"
	envSoakSeed         = "DRI_CDI_SOAK_SEED"
	defaultSoakDuration = 2 * time.Minute
	// soakBound is how long a pod may take to run after it was
	// scheduled or the last fault healed (invariant 3).
	soakBound = 90 * time.Second
)

// TestSoak churns GPU pods on a real cluster node while faults are
// injected at seeded random moments, first on a device-plugin node, then
// on a DRA node (one single-node cluster each), and checks the
// invariants of docs/soak.md as it goes and at the end:
//
//   - workloads: one card, two cards, a container that exits every few
//     seconds (restarted with the kubelet's cached allocation), on the
//     device-plugin node an init container and an app container, and on
//     the DRA node two pods sharing one ResourceClaim; up to four at a
//     time, each living 8 to 30 s;
//   - faults, one at a time, held 3 to 12 s: SIGKILL of the agent or
//     dri-cdi-dra, of dri-cdi-nri, of the kubelet and of containerd; a
//     card unbound; a card unbound while another takes its numbers; the
//     spec dir full; the spec dir read-only; PodResources delayed past
//     the daemons' deadline or not;
//   - invariants: no container starts with a card not allocated to it;
//     containers left holding an unbound card's numbers another card took
//     are counted; every pod runs within soakBound of being scheduled or
//     of the last heal; nothing leaks; every failure a pod is told says
//     why.
//
// It prints one summary per node, and the seed.
func TestSoak(t *testing.T) {
	d, seed := soakSettings(t)
	t.Logf("soak: %s of churn over both nodes, seed %d (replay with SOAK_SEED=%d)", d, seed, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("soak failed: replay with SOAK_SEED=%d", seed)
		}
	})
	t.Run("DevicePluginNode", func(t *testing.T) { soak(t, harness.SoakDevicePlugin, d/2, seed) })
	t.Run("DRANode", func(t *testing.T) { soak(t, harness.SoakDRA, d/2, seed) })
}

func soakSettings(t *testing.T) (time.Duration, uint64) {
	d := defaultSoakDuration
	if v := os.Getenv(envSoakDuration); v != "" {
		var err error
		d, err = time.ParseDuration(v)
		require.NoError(t, err, "SOAK_DURATION=%q", v)
		require.Positive(t, d, "SOAK_DURATION=%q", v)
	}
	var seed uint64
	if v := os.Getenv(envSoakSeed); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "SOAK_SEED=%q must be an unsigned integer", v)
	} else {
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:]) >> 1
	}
	return d, seed
}

// soak runs the soak for d on a new cluster whose node serves its three
// Intel cards in mode.
func soak(t *testing.T, mode string, d time.Duration, seed uint64) {
	ctx := context.Background()
	cards := []drmtest.GPU{harness.IntelGPU(0), harness.IntelGPU(1), harness.IntelGPU(2)}
	c := startCluster(t, harness.ClusterOptions{Name: "soak-" + mode, GPUs: cards, SpecDirSize: "64k", PodResourcesProxy: true})
	opts := harness.SoakOptions{
		Mode: mode, Seed: seed, Resource: resource, Workloads: 4, Bound: soakBound,
		Kinds: []string{harness.SoakSingle, harness.SoakMulti, harness.SoakInit, harness.SoakRestart},
		Faults: []harness.Fault{
			harness.FaultKillKubelet(), harness.FaultKillContainerd(),
			harness.FaultUnbind(), harness.FaultRenumber(),
			harness.FaultFillSpecDir(), harness.FaultReadOnlySpecDir(),
			harness.FaultDelayPodResources(),
		},
		DaemonNamespace: driCDINamespace,
	}
	switch mode {
	case harness.SoakDevicePlugin:
		overlay, err := c.WriteOverlay(filepath.Join(c.Dir, "overlay"), harness.OverlayOptions{})
		require.NoError(t, err)
		kubectl(t, c, "apply", "-k", overlay)
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, driCDIDaemonSet, 3*time.Minute))
		require.NoError(t, c.WaitAllocatable(ctx, resource, int64(len(cards)), 90*time.Second))
		opts.Faults = append(opts.Faults,
			harness.FaultKillDaemon(driCDINamespace, driCDIDaemonSet, "agent"),
			harness.FaultKillDaemon(driCDINamespace, driCDIDaemonSet, "nri"))
		opts.DaemonPods, opts.Daemons = driCDIPods, map[string]int{"agent": 9470, "nri": nriMetricsPort}
	case harness.SoakDRA:
		require.NoError(t, c.RequireDRA(ctx))
		require.NoError(t, c.LabelNode(ctx, draModeLabel, "dra"))
		overlay, err := c.WriteDRAOverlay(filepath.Join(c.Dir, "overlay-dra"))
		require.NoError(t, err)
		kubectl(t, c, "apply", "-k", overlay)
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, draDaemonSet, 3*time.Minute))
		waitSlice(t, c, len(cards))
		// No init workload here: dri-cdi-nri refuses a regular init
		// container's DRA claim ("CDI device not allocated by the
		// kubelet"), since PodResources leaves regular init containers
		// out and the kubelet checkpoint it falls back on covers device
		// plugin allocations only. docs/soak.md, Known defects.
		opts.Kinds = []string{harness.SoakSingle, harness.SoakMulti, harness.SoakRestart, harness.SoakShared}
		opts.Faults = append(opts.Faults,
			harness.FaultKillDaemon(driCDINamespace, draDaemonSet, "dra"),
			harness.FaultKillDaemon(driCDINamespace, draDaemonSet, "nri"))
		opts.DaemonPods, opts.Daemons = draPods, map[string]int{"dra": draMetricsPort, "nri": nriMetricsPort}
	}

	s := harness.NewSoak(c, t, opts)
	require.NoError(t, s.Start(ctx))
	st, err := s.Run(ctx, d)
	fmt.Print(st.Summary())
	require.NoError(t, err, "the soak's harness failed (seed %d)", seed)
	require.NotZero(t, st.Pods, "no pod was churned")
	require.NotEmpty(t, st.Faults, "no fault was injected")
	require.NotZero(t, st.Checked, "no container's devices were checked")
	require.Empty(t, st.Violations, "invariant violations (seed %d)", seed)
}
