package nri

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/watch"
)

func TestRefreshIsShared(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	loads := 0
	s := NewSpecIndex(t.TempDir(), testKind, func(string, string) (map[string][]drm.DeviceNode, error) {
		mu.Lock()
		loads++
		mu.Unlock()
		<-release
		return map[string][]drm.DeviceNode{}, nil
	}, nil, newStore(t, "").log)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Refresh(context.Background())
		}()
	}
	waiters := func() int {
		s.refreshMu.Lock()
		defer s.refreshMu.Unlock()
		if s.refresh == nil {
			return 0
		}
		return s.refresh.waiters
	}
	require.Eventually(t, func() bool { return waiters() == n }, 5*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, 1, loads, "a burst of misses does one reload")
	require.Equal(t, 1.0, testutil.ToFloat64(s.metrics.specRefreshes))
}

// fakeWatch is a directory watch the test fails, stops and restores.
type fakeWatch struct {
	mu     sync.Mutex
	fail   error
	events chan watch.Event
	starts int
}

func (f *fakeWatch) start(*logrus.Entry, string) (<-chan watch.Event, io.Closer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	if f.fail != nil {
		return nil, nil, f.fail
	}
	f.events = make(chan watch.Event)
	return f.events, io.NopCloser(nil), nil
}

func (f *fakeWatch) set(fail error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = fail
}

// stop ends the running watch as a closed inotify reader does.
func (f *fakeWatch) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.events)
}

// A watch that fails to start or stops is logged, counted and reported
// (readyz), the periodic reload keeps the store fresh meanwhile, and a
// later watch clears it.
func TestWatchFailureIsNotSilent(t *testing.T) {
	var mu sync.Mutex
	cards := map[string][]drm.DeviceNode{}
	s := NewSpecIndex(t.TempDir(), testKind, func(string, string) (map[string][]drm.DeviceNode, error) {
		mu.Lock()
		defer mu.Unlock()
		out := map[string][]drm.DeviceNode{}
		for k, v := range cards {
			out[k] = v
		}
		return out, nil
	}, nil, newStore(t, "").log, WithReloadInterval(20*time.Millisecond))
	fw := &fakeWatch{fail: errors.New("too many open files")}
	s.newWatcher = fw.start
	watching(t, s)

	require.Eventually(t, func() bool { return s.WatchErr() != nil }, 5*time.Second, time.Millisecond)
	require.ErrorContains(t, s.WatchErr(), "failed to watch CDI spec directory")
	require.ErrorContains(t, s.WatchErr(), "too many open files")
	require.GreaterOrEqual(t, testutil.ToFloat64(s.metrics.specWatchFailures), 1.0)
	require.Equal(t, 0.0, testutil.ToFloat64(s.metrics.specWatching))

	// The periodic reload still sees a new card.
	mu.Lock()
	cards[cardA] = testSource[cardA]
	mu.Unlock()
	require.Eventually(t, hasNodes(s, cardA, len(testSource[cardA])), 5*time.Second, time.Millisecond)

	// The watch works again at a later periodic attempt.
	fw.set(nil)
	require.Eventually(t, func() bool { return s.WatchErr() == nil }, 5*time.Second, time.Millisecond)
	require.Equal(t, 1.0, testutil.ToFloat64(s.metrics.specWatching))

	// The running watch stops: reported again (then the restart attempts
	// fail too), and counted.
	failures := testutil.ToFloat64(s.metrics.specWatchFailures)
	fw.set(errors.New("still broken"))
	fw.stop()
	require.Eventually(t, func() bool { return s.WatchErr() != nil }, 5*time.Second, time.Millisecond)
	require.GreaterOrEqual(t, testutil.ToFloat64(s.metrics.specWatchFailures), failures+1)
}
