package scenarios

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/usage"
)

// claimSeries is one claim series of dri-cdi-dra's usage metrics.
type claimSeries struct {
	claimNamespace, claim, shareID string
	value                          float64
}

// claimSeriesOf returns the samples of a claim metric
// (dri_cdi_usage_claim_*) in a /metrics answer, keyed
// "<card>/<namespace>/<pod>/<container>".
func claimSeriesOf(t *testing.T, body, name string) map[string][]claimSeries {
	t.Helper()
	m, err := harness.ParseMetrics(body)
	require.NoError(t, err)
	out := map[string][]claimSeries{}
	for _, sm := range m.Samples(name) {
		l := sm.Labels
		key := fmt.Sprintf("%s/%s/%s/%s", l["card"], l["namespace"], l["pod"], l["container"])
		out[key] = append(out[key], claimSeries{claimNamespace: l["claim_namespace"], claim: l["claim"], shareID: l["share_id"], value: sm.Value})
	}
	return out
}

// TestClusterDRAShareUsage checks per-share usage on a DRA node: two pods
// each hold one share of a 2-share card (the dra-shares recipe's
// gpu-share template, as in TestClusterDRAShares) while their containers
// use it differently (the usage scenarios' proc tree: the real
// containers' PIDs, cgroups and comms, a synthetic fd link and fdinfo
// each). dri-cdi-dra's metrics attribute each pod's figures to its own
// claim and share ID, next to what the share was promised (one of two:
// half the card), and dri-cdi top reading those metrics shows the same.
func TestClusterDRAShareUsage(t *testing.T) {
	c, gpu, proc, bundles, render := startUsageCluster(t, "dra-share-usage")

	requireStep(t, "DRANodeWithSharesAndUsage", func(t *testing.T) {
		deployDRAUsage(t, c, harness.OverlayOptions{Config: sharesConfig}, proc, bundles)
		d := sliceDevice(t, waitSlice(t, c, 1), gpu)
		require.True(t, d.AllowMultipleAllocations)
	})

	// Each sharer's video engine time (ns) and its claim.
	video := map[string]uint64{"share-a": 6e9, "share-b": 2e9}
	claims := map[string]harness.Claim{}
	requireStep(t, "TwoPodsEachHoldOneShare", func(t *testing.T) {
		root, err := harness.RepoRoot()
		require.NoError(t, err)
		kubectl(t, c, "apply", "-n", "default", "-f", filepath.Join(root, sharesTemplates))
		for p := range video {
			apply(t, c, harness.ClaimPod(p, harness.ClaimRef{Template: "gpu-share"}, harness.RenderPath(gpu)))
		}
		client := uint64(0)
		for _, p := range []string{"share-a", "share-b"} {
			res := claimPodProbes(t, c, p, harness.RenderPath(gpu))
			require.Equal(t, harness.ENXIO, res[harness.RenderPath(gpu)].Errno, "%s opens the shared card: %s", p, res[harness.RenderPath(gpu)].Message)
			claims[p] = podClaim(t, c, p)
			require.NotEmpty(t, claims[p].Status.Allocation.Devices.Results[0].ShareID, "%s holds a share", p)
			pid := containerPID(t, bundles, mustOnePod(t, c, "default", "app="+p).ContainerID("app"))
			mirrorProcess(t, proc, pid)
			client++
			require.NoError(t, proc.SetFD(pid, 10, render, fdinfo(client, video[p], 1<<10)))
		}
		require.NotEqual(t, claims["share-a"].Metadata.Name, claims["share-b"].Metadata.Name)
	})

	who := func(p string) string { return fmt.Sprintf("%s/default/%s/app", gpu.ID(), p) }
	t.Run("EachSharersUsageIsItsClaims", func(t *testing.T) {
		var body string
		require.Eventually(t, func() bool {
			body = loopbackMetrics(t, c, draMetricsPort)
			busy := seriesOf(t, body, "dri_cdi_usage_engine_busy_seconds_total", "engine")
			return busy[who("share-a")+"/video"] == 6 && busy[who("share-b")+"/video"] == 2 &&
				len(claimSeriesOf(t, body, "dri_cdi_usage_claim_shares")) == 2
		}, 60*time.Second, usageInterval/2, "each sharer's video time, and a claim series each, in dri-cdi-dra's metrics")
		shares := claimSeriesOf(t, body, "dri_cdi_usage_claim_shares")
		promised := claimSeriesOf(t, body, "dri_cdi_usage_claim_promised_ratio")
		for p := range video {
			r := claims[p].Status.Allocation.Devices.Results[0]
			want := claimSeries{claimNamespace: "default", claim: claims[p].Metadata.Name, shareID: r.ShareID}
			want.value = 1
			require.Equal(t, []claimSeries{want}, shares[who(p)], "%s's usage is its own claim's, one share", p)
			want.value = 0.5
			require.Equal(t, []claimSeries{want}, promised[who(p)], "%s was promised half the card", p)
		}
	})

	t.Run("TopShowsEachSharersClaim", func(t *testing.T) {
		url := "http://127.0.0.1:" + strconv.Itoa(draMetricsPort) + "/metrics"
		out, err := exec.Command(suite.Product.CLI, "top", "--once", "-o", "json", "--interval", "1500ms", "--metrics-url", url).CombinedOutput()
		require.NoError(t, err, string(out))
		var snap usage.Snapshot
		require.NoError(t, json.Unmarshal(out, &snap), string(out))
		require.Len(t, snap.Cards, 1)
		require.Len(t, snap.Cards[0].Users, 2)
		for _, u := range snap.Cards[0].Users {
			cl := claims[u.Pod]
			require.Equal(t, []usage.Claim{{Card: gpu.ID(), Namespace: "default", Name: cl.Metadata.Name,
				ShareID: cl.Status.Allocation.Devices.Results[0].ShareID, Shares: 1, CardShares: 2}}, u.Claims, u.Pod)
		}
	})

	t.Run("DeletedSharersClaimSeriesGo", func(t *testing.T) {
		pid := containerPID(t, bundles, mustOnePod(t, c, "default", "app=share-a").ContainerID("app"))
		kubectl(t, c, "delete", "pod", "share-a", "--wait=true")
		require.NoError(t, proc.Exit(pid))
		require.Eventually(t, func() bool {
			s := claimSeriesOf(t, loopbackMetrics(t, c, draMetricsPort), "dri_cdi_usage_claim_shares")
			_, a := s[who("share-a")]
			_, b := s[who("share-b")]
			return !a && b
		}, 60*time.Second, usageInterval/2, "share-a's claim series go with it, share-b's stay")
		kubectl(t, c, "delete", "pod", "share-b", "--wait=true")
	})
}
