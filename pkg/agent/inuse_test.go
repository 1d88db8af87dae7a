package agent

import (
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logrustest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// heldBackend is a Backend that records the cards in use
// (InUseReporter) and the health of every update.
type heldBackend struct {
	*fakeBackend
	held map[string]string
	err  error

	mu        sync.Mutex
	unhealthy []map[string]bool
}

func (b *heldBackend) CardsInUse() (map[string]string, error) { return b.held, b.err }

func (b *heldBackend) Update(pools []config.Pool, unhealthy map[string]bool) error {
	b.mu.Lock()
	b.unhealthy = append(b.unhealthy, maps.Clone(unhealthy))
	b.mu.Unlock()
	return b.fakeBackend.Update(pools, unhealthy)
}

func (b *heldBackend) lastUnhealthy() map[string]bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.unhealthy[len(b.unhealthy)-1]
}

// runHeld runs the agent on tree with b as its backend until the test
// ends, and returns its CDI dir once the first pass is published.
func runHeld(t *testing.T, tree *drmtest.Tree, b *heldBackend, log *logrus.Entry) (cdiDir string) {
	t.Helper()
	cdiDir = t.TempDir()
	runAgent(t, Options{Roots: tree.Roots(), CDIDir: cdiDir, Log: log}, b)
	select {
	case <-b.ran:
	case <-time.After(wait):
		t.Fatal("the backend was not started")
	}
	return cdiDir
}

// specPaths returns the paths of the device nodes the CDI specs in dir
// give card id, and whether they define it at all.
func specPaths(t *testing.T, dir, id string) ([]string, bool) {
	t.Helper()
	devs, err := cdi.LoadDevices(dir, cdi.DefaultKind)
	require.NoError(t, err)
	nodes, ok := devs[id]
	var paths []string
	for _, n := range nodes {
		paths = append(paths, n.Path)
	}
	return paths, ok
}

// A backend that reports a card in use which is unbound at start gets it
// in the first pass, Unhealthy under the reported resource, with a spec
// without device nodes; once the card binds again it is Healthy with its
// own nodes. The device plugin's kubelet checkpoint and the DRA driver's
// claims take this one path.
func TestRunSeedsTheBackendsCardsInUse(t *testing.T) {
	xe := drmtest.IntelXe.WithNodes(1, 129)
	tree := drmtest.MustBuild(t, drmtest.IntelIGPU, xe)
	require.NoError(t, tree.Unbind(xe.ID()))
	b := &heldBackend{fakeBackend: &fakeBackend{ran: make(chan struct{})}, held: map[string]string{xe.ID(): "dri-cdi.dev/xe"}}
	cdiDir := runHeld(t, tree, b, testEntry(t))

	require.Equal(t, []string{"0000:00:02.0", xe.ID()}, b.last())
	require.Equal(t, map[string]bool{xe.ID(): true}, b.lastUnhealthy())
	paths, ok := specPaths(t, cdiDir, xe.ID())
	require.True(t, ok, "the held card's CDI name must keep resolving")
	require.Empty(t, paths, "to no device node: its numbers may be another card's now")

	require.NoError(t, tree.Rebind(xe.ID()))
	require.Eventually(t, func() bool { return len(b.lastUnhealthy()) == 0 }, wait, tick)
	require.Equal(t, []string{"0000:00:02.0", xe.ID()}, b.last())
	paths, _ = specPaths(t, cdiDir, xe.ID())
	require.Contains(t, paths, "/dev/dri/renderD129")
}

// A card in use whose record names no resource, or one the config does
// not serve, is not listed while it is unbound, and the agent says so; a
// record that cannot be read is a warning, not a failed start.
func TestRunCardsInUseUnknownOrUnreadable(t *testing.T) {
	xe := drmtest.IntelXe.WithNodes(1, 129)
	for name, b := range map[string]*heldBackend{
		"unknown resource": {held: map[string]string{xe.ID(): ""}},
		"not served":       {held: map[string]string{xe.ID(): "example.com/xe"}},
		"unreadable":       {err: errors.New("checkpoint is corrupt")},
	} {
		t.Run(name, func(t *testing.T) {
			tree := drmtest.MustBuild(t, drmtest.IntelIGPU, xe)
			require.NoError(t, tree.Unbind(xe.ID()))
			b.fakeBackend = &fakeBackend{ran: make(chan struct{})}
			log := testEntry(t)
			hook := logrustest.NewLocal(log.Logger)
			runHeld(t, tree, b, log)
			require.Equal(t, []string{"0000:00:02.0"}, b.last())
			var warned []string
			for _, e := range hook.AllEntries() {
				if e.Level == logrus.WarnLevel {
					warned = append(warned, e.Message)
				}
			}
			want := msgUnlisted
			if b.err != nil {
				want = "cannot read which cards are in use; a card unbound at start is not listed"
			}
			require.Contains(t, warned, want)
		})
	}
}
