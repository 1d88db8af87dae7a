package agent

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/metrics"
)

// fakeBackend records what the loop publishes.
type fakeBackend struct {
	mu      sync.Mutex
	updates [][]string
	runErr  error
	ran     chan struct{}
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

// With a Backend the loop publishes there, follows hotplug, writes the
// specs, and leaves the kubelet's device-plugins dir alone.
func TestRunWithBackend(t *testing.T) {
	tree := drmtest.MustBuild(t, drmtest.IntelIGPU)
	kubelet, cdiDir := kubelettest.ShortDir(t), t.TempDir()
	b := &fakeBackend{ran: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Roots: tree.Roots(), CDIDir: cdiDir, KubeletDir: kubelet, ResyncInterval: time.Hour, Log: testEntry(t),
			NewBackend: func(cfg *config.Config, met *metrics.Agent) (Backend, error) {
				require.NotNil(t, met)
				return b, nil
			}})
	}()
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

// A backend that fails ends Run with its error; one that cannot be built
// fails Run before a spec is written.
func TestRunEndsWhenTheBackendFails(t *testing.T) {
	tree := drmtest.MustBuild(t, drmtest.IntelIGPU)
	b := &fakeBackend{ran: make(chan struct{}), runErr: errors.New("gRPC server failed")}
	err := Run(context.Background(), Options{Roots: tree.Roots(), CDIDir: t.TempDir(), KubeletDir: kubelettest.ShortDir(t), ResyncInterval: time.Hour, Log: testEntry(t),
		NewBackend: func(*config.Config, *metrics.Agent) (Backend, error) { return b, nil }})
	require.EqualError(t, err, "publisher: gRPC server failed")

	cdiDir := filepath.Join(t.TempDir(), "cdi")
	err = Run(context.Background(), Options{Roots: tree.Roots(), CDIDir: cdiDir, KubeletDir: kubelettest.ShortDir(t), ResyncInterval: time.Hour, Log: testEntry(t),
		Delivery:   "not checked with a backend",
		NewBackend: func(*config.Config, *metrics.Agent) (Backend, error) { return nil, errors.New("no node name") }})
	require.EqualError(t, err, "no node name")
	require.NoDirExists(t, cdiDir)
}
