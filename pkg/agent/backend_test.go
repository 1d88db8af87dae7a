package agent

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/agent/agenttest"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/logging/loggingtest"
)

const (
	wait = agenttest.Wait
	tick = 2 * time.Millisecond
)

func testEntry(t testing.TB) *logrus.Entry {
	return loggingtest.New(t, logrus.TraceLevel)
}

// fakeBackend records what the loop publishes.
type fakeBackend struct {
	mu      sync.Mutex
	updates [][]string
	runErr  error
	ran     chan struct{}
	dirs    []HostDir
}

func (b *fakeBackend) HostDirs() []HostDir { return b.dirs }

// runAgent runs the loop with o and backend b until the test ends
// (agenttest.Serve). Left unset, the CDI dir is a fresh temp dir and the
// full rescan an hour away: the tests make their changes seen through
// the watchers.
func runAgent(t *testing.T, o Options, b Backend) *agenttest.Running {
	t.Helper()
	if o.CDIDir == "" {
		o.CDIDir = filepath.Join(t.TempDir(), "cdi")
	}
	if o.ResyncInterval == 0 {
		o.ResyncInterval = time.Hour
	}
	o.MetricsAddr = "127.0.0.1:0"
	return agenttest.Serve(t, func(ctx context.Context, onListen func(net.Addr)) error {
		o.OnMetricsListen = onListen
		return run(ctx, o, b)
	})
}

// run is New then Run, for the tests that look at Run's result.
func run(ctx context.Context, o Options, b Backend) error {
	loop, err := New(o)
	if err != nil {
		return err
	}
	return loop.Run(ctx, b)
}

func (b *fakeBackend) Update(pools []config.Pool, _ map[string]bool) error {
	var ids []string
	for _, p := range pools {
		for _, c := range p.Cards {
			ids = append(ids, c.ID)
		}
	}
	b.mu.Lock()
	b.updates = append(b.updates, ids)
	b.mu.Unlock()
	return nil
}

func (b *fakeBackend) last() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.updates) == 0 {
		return nil
	}
	return b.updates[len(b.updates)-1]
}

func (b *fakeBackend) Ready() error { return nil }

func (b *fakeBackend) Run(ctx context.Context) error {
	close(b.ran)
	if b.runErr != nil {
		return b.runErr
	}
	<-ctx.Done()
	return nil
}

// The loop publishes to its Backend, follows hotplug, writes the specs,
// and leaves the backend's host directories alone.
func TestRunWithBackend(t *testing.T) {
	tree := drmtest.MustBuild(t, drmtest.IntelIGPU)
	kubelet, cdiDir := kubelettest.ShortDir(t), t.TempDir()
	b := &fakeBackend{ran: make(chan struct{}), dirs: []HostDir{{Path: kubelet, Missing: "x"}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	loop, err := New(Options{Roots: tree.Roots(), CDIDir: cdiDir, ResyncInterval: time.Hour, Log: testEntry(t)})
	require.NoError(t, err)
	require.NotNil(t, loop.Metrics().Registry, "a backend registers its metrics there")
	require.NotNil(t, loop.Config())
	go func() { done <- loop.Run(ctx, b) }()
	<-b.ran
	require.Equal(t, []string{"0000:00:02.0"}, b.last())
	require.NoError(t, tree.Add(drmtest.IntelXe.WithNodes(1, 129)))
	require.Eventually(t, func() bool { return len(b.last()) == 2 }, wait, tick)
	specs, err := filepath.Glob(filepath.Join(cdiDir, "*0000-03-00.0*"))
	require.NoError(t, err)
	require.Len(t, specs, 1)
	cancel()
	require.NoError(t, <-done)
	left, err := filepath.Glob(filepath.Join(kubelet, "*"))
	require.NoError(t, err)
	require.Empty(t, left)
}

// A backend that fails ends Run with its error; without a backend Run
// fails before a spec is written.
func TestRunEndsWhenTheBackendFails(t *testing.T) {
	tree := drmtest.MustBuild(t, drmtest.IntelIGPU)
	b := &fakeBackend{ran: make(chan struct{}), runErr: errors.New("gRPC server failed")}
	err := run(context.Background(), Options{Roots: tree.Roots(), CDIDir: t.TempDir(), ResyncInterval: time.Hour, Log: testEntry(t)}, b)
	require.EqualError(t, err, "publisher: gRPC server failed")

	cdiDir := filepath.Join(t.TempDir(), "cdi")
	err = run(context.Background(), Options{Roots: tree.Roots(), CDIDir: cdiDir, ResyncInterval: time.Hour, Log: testEntry(t)}, nil)
	require.EqualError(t, err, "no backend")
	require.NoDirExists(t, cdiDir)
}
