package nri

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/pkg/watch"
)

// DefaultReloadInterval is the default period of the spec index's
// reload that backs the directory watch.
const DefaultReloadInterval = time.Minute

// dirWatcher watches dir with inotify (watch.DirWatcher).
func dirWatcher(log *logrus.Entry, dir string) (<-chan watch.Event, io.Closer, error) {
	w, err := watch.NewDirWatcher(log, dir)
	if err != nil {
		return nil, nil, err
	}
	return w.Events(), w, nil
}

// IndexOption changes how a SpecIndex works.
type IndexOption func(*SpecIndex)

// WithReloadInterval sets the period of the reload that backs the watch;
// zero or less means DefaultReloadInterval.
func WithReloadInterval(d time.Duration) IndexOption {
	return func(s *SpecIndex) { s.interval = d }
}

// WatchErr returns why the spec directory is not watched, nil while it is
// (or before Watch started). /readyz reports it.
func (s *SpecIndex) WatchErr() error {
	if p := s.watchErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *SpecIndex) watchFailed(err error, interval time.Duration) {
	s.metrics.specWatchFailures.Inc()
	s.metrics.specWatching.Set(0)
	s.watchErr.Store(&err)
	s.log.WithError(err).WithField("reloadInterval", interval.String()).Error(
		"CDI spec directory not watched: spec changes are seen only at the periodic reload; retrying the watch then")
}

func (s *SpecIndex) watchOK() {
	s.metrics.specWatching.Set(1)
	if s.watchErr.Swap(nil) != nil {
		s.log.Info("watching the CDI spec directory again")
	}
}

// flight is one reload that several waiters share.
type flight struct {
	done chan struct{}
	err  error
	// waiters counts the callers sharing the reload.
	waiters int
}

// Refresh reloads the specs for a request that found a card missing. A
// burst of such requests shares one reload: a caller that arrives while
// a refresh runs waits for that one instead of starting another. It
// returns the reload's error, or ctx's when ctx ends first (the reload
// then completes in the background).
func (s *SpecIndex) Refresh(ctx context.Context) error {
	s.refreshMu.Lock()
	f := s.refresh
	if f == nil {
		f = &flight{done: make(chan struct{})}
		s.refresh = f
		s.metrics.specRefreshes.Inc()
		go func() {
			f.err = s.Reload()
			s.refreshMu.Lock()
			s.refresh = nil
			s.refreshMu.Unlock()
			close(f.done)
		}()
	}
	f.waiters++
	s.refreshMu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return errors.Join(errors.New("CDI spec reload still running"), ctx.Err())
	}
}
