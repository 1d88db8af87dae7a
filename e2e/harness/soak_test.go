package harness

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestHostCardsByNumber follows the fake host's numbers through an
// unbind and a renumber, as the soak's invariant 1 reads them.
func TestHostCardsByNumber(t *testing.T) {
	x, y := IntelGPU(0), IntelGPU(1)
	tree, err := drmtest.NewTree(t.TempDir(), x, y)
	require.NoError(t, err)
	sys := tree.Roots().Sysfs
	cards, err := HostCardsByNumber(sys)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"226:0": x.ID(), "226:128": x.ID(), "226:1": y.ID(), "226:129": y.ID()}, cards)

	require.NoError(t, tree.Unbind(x.ID()))
	require.NoError(t, tree.Renumber(y.ID(), x.Card, x.Render))
	cards, err = HostCardsByNumber(sys)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"226:0": y.ID(), "226:128": y.ID()}, cards, "Y holds X's old numbers, X none")

	_, err = HostCardsByNumber(filepath.Join(t.TempDir(), "none"))
	require.Error(t, err)
}

// TestTopologyBetween: a container created around a change is checked
// against the topologies before and after it.
func TestTopologyBetween(t *testing.T) {
	t0 := time.Now().Add(-time.Minute)
	before, after := map[string]string{"226:128": "x"}, map[string]string{"226:128": "y"}
	s := &Soak{topo: []topoEntry{{from: t0, cards: before}, {from: t0.Add(10 * time.Second), cards: after}}}
	require.Equal(t, []map[string]string{before}, s.topologyBetween(t0.Add(time.Second), t0.Add(2*time.Second)))
	require.Equal(t, []map[string]string{before, after}, s.topologyBetween(t0.Add(9*time.Second), t0.Add(11*time.Second)))
	require.Equal(t, []map[string]string{after}, s.topologyBetween(t0.Add(20*time.Second), t0.Add(21*time.Second)))
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Second)
	}
	require.Equal(t, 50*time.Second, percentile(ds, 50))
	require.Equal(t, 99*time.Second, percentile(ds, 99))
	require.Equal(t, 100*time.Second, percentile(ds, 100))
	require.Equal(t, 2*time.Second, percentile([]time.Duration{2 * time.Second}, 99))
	require.Zero(t, percentile(nil, 50))
}

func TestNormalizeMessage(t *testing.T) {
	m := `dri-cdi: container "init" of pod default/soak-init-12: pod 0f0e4a55-1b2c-4d5e-8f90-a1b2c3d4e5f6 container 15833730c5b5b947d170ab60eeccb436f9bfce4507e5855c54938aff52594b14`
	require.Equal(t, `dri-cdi: container "init" of pod default/<pod>: pod <id> container <id>`, normalizeMessage(m))
	require.Equal(t, "<pod> and <pod>", normalizeMessage("soak-shared-3-a and soak-single-4"))
}

// TestPodResourcesProxyDelays: requests reach the upstream socket no
// sooner than the delay in force, answers come back, and a delay of 0
// forwards at once.
func TestPodResourcesProxyDelays(t *testing.T) {
	dir := shortTempDir(t)
	upstream := filepath.Join(dir, "up.sock")
	l, err := net.Listen("unix", upstream)
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	p, err := StartPodResourcesProxy(filepath.Join(dir, "proxy", "kubelet.sock"), upstream)
	require.NoError(t, err)
	defer p.Close()

	roundTrip := func() time.Duration {
		c, err := net.Dial("unix", p.Socket)
		require.NoError(t, err)
		defer c.Close()
		start := time.Now()
		_, err = c.Write([]byte("ping"))
		require.NoError(t, err)
		buf := make([]byte, 4)
		_, err = io.ReadFull(c, buf)
		require.NoError(t, err)
		require.Equal(t, "ping", string(buf))
		return time.Since(start)
	}
	p.SetDelay(300 * time.Millisecond)
	require.GreaterOrEqual(t, roundTrip(), 300*time.Millisecond, "the request must be held for the delay")
	p.SetDelay(0)
	roundTrip()
	require.NoError(t, p.Close())
	_, err = net.Dial("unix", p.Socket)
	require.Error(t, err, "a closed proxy must not accept")
}

// shortTempDir is a temp dir short enough for unix socket paths.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "soak")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// fakeKubectl is a kubectl that logs its arguments, one call a line, to
// log; a create fails when the count of creates so far reaches failAt
// (0: never).
func fakeKubectl(t *testing.T, failAt int) (c *Cluster, log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "calls")
	script := `#!/bin/sh
shift # --kubeconfig
echo "$*" >> ` + log + `
if [ "$1" = create ]; then
	cat > /dev/null
	n=$(grep -c '^create' ` + log + `)
	if [ "$n" = ` + fmt.Sprint(failAt) + ` ]; then echo "refused by the test" >&2; exit 1; fi
fi
`
	bin := filepath.Join(dir, "kubectl")
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o755))
	return &Cluster{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), Tools: ClusterTools{Kubectl: bin}}, log
}

func calls(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestCreateWorkloadIsNotCutInHalf: the churn's end (its context done)
// must not stop a workload's creation halfway, and a workload whose
// creation fails halfway is deleted again, so that the drain never waits
// for pods nobody deletes.
func TestCreateWorkloadIsNotCutInHalf(t *testing.T) {
	w, err := newSoakWorkload(SoakDRA, SoakShared, "soak-shared-1", "")
	require.NoError(t, err)
	require.Len(t, w.manifests, 3, "claim and two pods")

	t.Run("churn over", func(t *testing.T) {
		c, log := fakeKubectl(t, 0)
		s := NewSoak(c, t, SoakOptions{Mode: SoakDRA})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.NoError(t, s.createWorkload(ctx, w))
		require.Equal(t, []string{"create -f -", "create -f -", "create -f -"}, calls(t, log))
		require.Equal(t, 1, s.stats.Created[SoakShared])
	})
	t.Run("failed halfway", func(t *testing.T) {
		c, log := fakeKubectl(t, 3)
		s := NewSoak(c, t, SoakOptions{Mode: SoakDRA})
		require.ErrorContains(t, s.createWorkload(context.Background(), w), "refused by the test")
		require.Equal(t, []string{"create -f -", "create -f -", "create -f -",
			"delete pod -n default --wait=false --ignore-not-found soak-shared-1-a soak-shared-1-b",
			"delete resourceclaim -n default --wait=false --ignore-not-found soak-shared-1"}, calls(t, log))
		require.Zero(t, s.stats.Created[SoakShared])
	})
}
