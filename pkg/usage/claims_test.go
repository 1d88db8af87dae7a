package usage_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/usage"
	"github.com/dri-cdi/dri-cdi/pkg/usage/usagetest"
)

// claimSource is a ClaimSource answering what the test sets.
type claimSource struct {
	mu     sync.Mutex
	claims map[usage.Names][]usage.Claim
	err    error
	calls  int
}

func (s *claimSource) ContainerClaims(context.Context) (map[usage.Names][]usage.Claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.claims, s.err
}

func (s *claimSource) set(claims map[usage.Names][]usage.Claim, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims, s.err = claims, err
}

const (
	shareA = "11111111-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
	shareB = "22222222-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
)

// TestClaimsAttributeEachSharer: two media servers share one card, one
// share each of two; each row carries its own claim and share, next to
// its own figures, in the snapshot and in the metrics.
func TestClaimsAttributeEachSharer(t *testing.T) {
	src := &claimSource{}
	r := newRigWith(t, time.Minute, src)
	plex := usage.Names{Namespace: "media", Pod: "plex-0", Container: "plex"}
	jelly := usage.Names{Namespace: "media", Pod: "jellyfin-0", Container: "jellyfin"}
	plexClaim := usage.Claim{Card: "0000:00:02.0", Namespace: "media", Name: "plex-0-gpu-x7k2p", ShareID: shareA, Shares: 1, CardShares: 2}
	jellyClaim := usage.Claim{Card: "0000:00:02.0", Namespace: "media", Name: "jellyfin-0-gpu-q9z4m", ShareID: shareB, Shares: 1, CardShares: 2, Memory: 2 << 30}
	src.set(map[usage.Names][]usage.Claim{
		plex:  {plexClaim, {Card: "0000:03:00.0", Namespace: "media", Name: "plex-0-dgpu"}},
		jelly: {jellyClaim},
		// A container without a client on any card: no row, no series.
		{Namespace: "media", Pod: "idle-0", Container: "idle"}: {{Card: "0000:00:02.0", Namespace: "media", Name: "idle", ShareID: "x", Shares: 1, CardShares: 2}},
	}, nil)
	r.container(podA, ctrA, "media", "plex-0", "plex")
	r.container(podB, ctrB, "media", "jellyfin-0", "jellyfin")
	require.NoError(t, r.proc.AddProcess(11, "plex", usagetest.CgroupV2Systemd(podA, ctrA)))
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", i915(1, 3e9)))
	require.NoError(t, r.proc.AddProcess(12, "ffmpeg", usagetest.CgroupV2Systemd(podB, ctrB)))
	require.NoError(t, r.proc.SetFD(12, 5, "/dev/dri/renderD128", i915(2, 1e9)))
	require.NoError(t, r.proc.AddProcess(13, "Xorg", usagetest.CgroupHost))
	require.NoError(t, r.proc.SetFD(13, 5, "/dev/dri/renderD128", i915(3, 0)))
	s := r.scan(0)
	require.Equal(t, 1, src.calls, "one call per scan")

	require.Equal(t, []usage.Claim{plexClaim}, user(s, "0000:00:02.0", "plex").Claims, "only the claim of this card")
	require.Equal(t, []usage.Claim{jellyClaim}, user(s, "0000:00:02.0", "jellyfin").Claims)
	require.Empty(t, user(s, "0000:00:02.0", usage.HostLabel).Claims, "the host holds no claim")

	c := usage.NewCollector(r.m)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	want := `
# HELP dri_cdi_usage_claim_promised_ratio The part of the card the container's DRA claim was promised, 0 to 1: its shares over the card's shares, 1 for a claim that holds the card whole, 0 with admin access. Compare with rate(dri_cdi_usage_engine_busy_seconds_total[5m]). dri-cdi-dra only.
# TYPE dri_cdi_usage_claim_promised_ratio gauge
dri_cdi_usage_claim_promised_ratio{card="0000:00:02.0",claim="jellyfin-0-gpu-q9z4m",claim_namespace="media",container="jellyfin",driver="i915",namespace="media",pod="jellyfin-0",share_id="` + shareB + `"} 0.5
dri_cdi_usage_claim_promised_ratio{card="0000:00:02.0",claim="plex-0-gpu-x7k2p",claim_namespace="media",container="plex",driver="i915",namespace="media",pod="plex-0",share_id="` + shareA + `"} 0.5
# HELP dri_cdi_usage_claim_shares Shares of the card the container's DRA claim consumed (share_id: its allocation's share ID); 0 for a claim that holds the card whole or with admin access. dri-cdi-dra only.
# TYPE dri_cdi_usage_claim_shares gauge
dri_cdi_usage_claim_shares{card="0000:00:02.0",claim="jellyfin-0-gpu-q9z4m",claim_namespace="media",container="jellyfin",driver="i915",namespace="media",pod="jellyfin-0",share_id="` + shareB + `"} 1
dri_cdi_usage_claim_shares{card="0000:00:02.0",claim="plex-0-gpu-x7k2p",claim_namespace="media",container="plex",driver="i915",namespace="media",pod="plex-0",share_id="` + shareA + `"} 1
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), "dri_cdi_usage_claim_promised_ratio", "dri_cdi_usage_claim_shares"))
	// Device memory only where the share was promised some.
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP dri_cdi_usage_claim_memory_bytes Device memory the container's DRA claim consumed of the card's memory capacity (where the card publishes one, a share's amount). Compare with dri_cdi_usage_memory_bytes. dri-cdi-dra only.
# TYPE dri_cdi_usage_claim_memory_bytes gauge
dri_cdi_usage_claim_memory_bytes{card="0000:00:02.0",claim="jellyfin-0-gpu-q9z4m",claim_namespace="media",container="jellyfin",driver="i915",namespace="media",pod="jellyfin-0",share_id="`+shareB+`"} 2.147483648e+09
`), "dri_cdi_usage_claim_memory_bytes"))
	lint, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	require.Empty(t, lint)

	// The kubelet cannot be asked for a while: the rows keep the claims
	// last read instead of losing them.
	src.set(nil, errors.New("kubelet PodResources List: connection refused"))
	s = r.scan(time.Second)
	require.Equal(t, []usage.Claim{plexClaim}, user(s, "0000:00:02.0", "plex").Claims)

	// It answers again without jellyfin's claim (its pod changed claims).
	src.set(map[usage.Names][]usage.Claim{plex: {plexClaim}}, nil)
	s = r.scan(time.Second)
	require.Empty(t, user(s, "0000:00:02.0", "jellyfin").Claims)
	require.Equal(t, 1, testutil.CollectAndCount(c, "dri_cdi_usage_claim_shares"))
}

// TestClaimsOfUnnamedContainers: a container whose names cannot be read
// is never given another container's claims.
func TestClaimsOfUnnamedContainers(t *testing.T) {
	src := &claimSource{}
	r := newRigWith(t, time.Minute, src)
	src.set(map[usage.Names][]usage.Claim{
		{Namespace: usage.UnknownLabel, Pod: podA, Container: ctrA}: {{Card: "0000:00:02.0", Namespace: "media", Name: "c"}},
	}, nil)
	require.NoError(t, r.proc.AddProcess(11, "plex", usagetest.CgroupV2Systemd(podA, ctrA))) // no bundle
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", i915(1, 3e9)))
	s := r.scan(0)
	u := user(s, "0000:00:02.0", ctrA)
	require.NotNil(t, u)
	require.False(t, u.Named)
	require.Empty(t, u.Claims)
}

func TestClaimPromised(t *testing.T) {
	for name, tc := range map[string]struct {
		claim usage.Claim
		want  float64
		ok    bool
	}{
		"one share of two":         {usage.Claim{ShareID: "s", Shares: 1, CardShares: 2}, 0.5, true},
		"three shares of four":     {usage.Claim{ShareID: "s", Shares: 3, CardShares: 4}, 0.75, true},
		"the card whole":           {usage.Claim{}, 1, true},
		"admin access":             {usage.Claim{Admin: true}, 0, true},
		"admin access of a share":  {usage.Claim{Admin: true, ShareID: "s", Shares: 1, CardShares: 2}, 0, true},
		"a share of unknown count": {usage.Claim{ShareID: "s", Shares: 1}, 0, false},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := tc.claim.Promised()
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}
