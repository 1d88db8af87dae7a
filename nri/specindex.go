package nri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/watch"
)

// LoadFunc reads the nodes of every card from the CDI spec files of kind in
// dir, by card ID; cdi.LoadDevices is one.
type LoadFunc func(dir, kind string) (map[string][]drm.DeviceNode, error)

// debounce coalesces the events of one spec update (temp file, rename,
// ...) into one reload.
const debounce = 100 * time.Millisecond

// SpecIndex is the DeviceSource of the plugin: the card nodes of our CDI
// specs, held in memory. Reload and Watch read the directory; Nodes never
// does I/O.
type SpecIndex struct {
	dir, kind string
	load      LoadFunc
	metrics   *Metrics
	log       *logrus.Entry

	cards atomic.Pointer[map[string][]drm.DeviceNode]

	// newWatcher starts the directory watch; nil means dirWatcher.
	newWatcher func(log *logrus.Entry, dir string) (<-chan watch.Event, io.Closer, error)
	// interval is the period of the reload that backs the watch.
	interval time.Duration
	// watchErr holds the error of the last failed watch until a watch
	// works again.
	watchErr atomic.Pointer[error]
	// refresh is the reload a missing card started, shared by every
	// request that misses meanwhile.
	refreshMu sync.Mutex
	refresh   *flight
}

// NewSpecIndex returns an index of the specs of kind in dir. It holds no
// cards until the first Reload.
func NewSpecIndex(dir, kind string, load LoadFunc, metrics *Metrics, log *logrus.Entry, opts ...IndexOption) *SpecIndex {
	if metrics == nil {
		metrics = NewMetrics()
	}
	s := &SpecIndex{dir: dir, kind: kind, load: load, metrics: metrics, log: log.WithField("cdiDir", dir)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Nodes returns the nodes of a card as last loaded.
func (s *SpecIndex) Nodes(cardID string) ([]drm.DeviceNode, bool) {
	m := s.cards.Load()
	if m == nil {
		return nil, false
	}
	n, ok := (*m)[cardID]
	return n, ok
}

// CardOf returns the card whose nodes have numbers major:minor, as last
// loaded.
func (s *SpecIndex) CardOf(major, minor uint32) (string, bool) {
	m := s.cards.Load()
	if m == nil {
		return "", false
	}
	for id, nodes := range *m {
		for _, n := range nodes {
			if n.Major == major && n.Minor == minor {
				return id, true
			}
		}
	}
	return "", false
}

// Loaded reports whether the specs were loaded at least once.
func (s *SpecIndex) Loaded() bool { return s.cards.Load() != nil }

// Reload reads the specs again. A missing directory holds no cards. A
// load that fails as a whole keeps the cards loaded before; a load that
// returns cards together with an error (some files were unusable) uses
// those cards and returns the error.
func (s *SpecIndex) Reload() error {
	m, err := s.load(s.dir, s.kind)
	if m == nil && errors.Is(err, fs.ErrNotExist) {
		if _, statErr := os.Stat(s.dir); errors.Is(statErr, fs.ErrNotExist) {
			m, err = map[string][]drm.DeviceNode{}, nil
		}
	}
	if err != nil {
		s.metrics.specReloads.WithLabelValues("error").Inc()
		err = fmt.Errorf("failed to load CDI specs of kind %s from %s: %w", s.kind, s.dir, err)
		if m == nil {
			return err
		}
	} else {
		s.metrics.specReloads.WithLabelValues("ok").Inc()
	}
	cards := make(map[string][]drm.DeviceNode, len(m))
	for id, nodes := range m {
		if id == cdi.AllDevice {
			continue // never allocated, never injected
		}
		own := make([]drm.DeviceNode, len(nodes))
		for i, n := range nodes {
			own[i] = fromHost(n)
		}
		cards[id] = own
	}
	s.cards.Store(&cards)
	s.metrics.specCards.Set(float64(len(cards)))
	return err
}

func (s *SpecIndex) reloadLogged() {
	if err := s.Reload(); err != nil {
		s.log.WithError(err).Error("CDI specs not (fully) loaded")
	} else if m := s.cards.Load(); m != nil {
		s.log.WithField("cards", len(*m)).Debug("loaded CDI specs")
	}
}

// fromHost fills a node's mode and owner from the host node when it is
// visible here and has the node's numbers; the spec leaves them open.
func fromHost(n drm.DeviceNode) drm.DeviceNode {
	p := n.HostPath
	if p == "" {
		p = n.Path
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return n
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != n.Major || unix.Minor(st.Rdev) != n.Minor {
		return n
	}
	n.Mode = os.FileMode(st.Mode & 0o777)
	n.UID, n.GID = st.Uid, st.Gid
	return n
}

// Watch loads the specs and reloads them whenever an entry of the
// directory changes, and every reload interval in any case, until ctx
// ends; it then returns nil. A missing directory is waited for. Spec
// files are replaced by rename, as the agent writes them.
//
// The watch cannot fail silently: a watcher that cannot start, or that
// stops, is logged, counted in dri_cdi_nri_cdi_watch_failures_total and
// reported by WatchErr (which turns /readyz unready) until a later
// attempt, made at every periodic reload, watches again. The periodic
// reload keeps the index fresh meanwhile.
func (s *SpecIndex) Watch(ctx context.Context) error {
	interval := s.interval
	if interval <= 0 {
		interval = DefaultReloadInterval
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()

	var w io.Closer
	defer func() {
		if w != nil {
			_ = w.Close()
		}
	}()
	var events <-chan watch.Event
	newWatcher := s.newWatcher
	if newWatcher == nil {
		newWatcher = dirWatcher
	}
	start := func() {
		ev, c, err := newWatcher(s.log, s.dir)
		if err != nil {
			s.watchFailed(fmt.Errorf("failed to watch CDI spec directory %s: %w", s.dir, err), interval)
			return
		}
		w, events = c, ev
		s.watchOK()
	}
	start()
	// Loading after the watch is in place misses no change.
	s.reloadLogged()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-events:
			if !ok {
				_ = w.Close()
				w, events = nil, nil
				s.watchFailed(fmt.Errorf("watching CDI spec directory %s stopped", s.dir), interval)
				continue
			}
			timer.Reset(debounce)
		case <-timer.C:
			s.reloadLogged()
		case <-ticker.C:
			if events == nil {
				start()
			}
			s.reloadLogged()
		}
	}
}
