package nri

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/watch"
)

// LoadFunc reads the nodes of every card from the CDI spec files of kind in
// dir, by card ID; cdi.LoadDevices is one.
type LoadFunc func(dir, kind string) (map[string][]drm.DeviceNode, error)

// debounce coalesces the events of one spec update (temp file, rename,
// ...) into one reload.
const debounce = 100 * time.Millisecond

// SpecStore is the DeviceSource of the plugin: the card nodes of our CDI
// specs, held in memory. Reload and Watch read the directory; Nodes never
// does I/O.
type SpecStore struct {
	dir, kind string
	load      LoadFunc
	metrics   *Metrics
	log       *logrus.Entry

	cards atomic.Pointer[map[string][]drm.DeviceNode]
}

// NewSpecStore returns a store of the specs of kind in dir. It holds no
// cards until the first Reload.
func NewSpecStore(dir, kind string, load LoadFunc, metrics *Metrics, log *logrus.Entry) *SpecStore {
	if metrics == nil {
		metrics = NewMetrics()
	}
	return &SpecStore{dir: dir, kind: kind, load: load, metrics: metrics, log: log.WithField("cdiDir", dir)}
}

// Nodes returns the nodes of a card as last loaded.
func (s *SpecStore) Nodes(cardID string) ([]drm.DeviceNode, bool) {
	m := s.cards.Load()
	if m == nil {
		return nil, false
	}
	n, ok := (*m)[cardID]
	return n, ok
}

// Loaded reports whether the specs were loaded at least once.
func (s *SpecStore) Loaded() bool { return s.cards.Load() != nil }

// Reload reads the specs again. A missing directory holds no cards. A
// load that fails as a whole keeps the cards loaded before; a load that
// returns cards together with an error (some files were unusable) uses
// those cards and returns the error.
func (s *SpecStore) Reload() error {
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
		if id == allDevice {
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

func (s *SpecStore) reloadLogged() {
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
// directory changes, until ctx ends. A missing directory is waited for.
// Spec files are replaced by rename, as the agent writes them.
func (s *SpecStore) Watch(ctx context.Context) error {
	w, err := watch.NewDirWatcher(s.log, s.dir)
	if err != nil {
		return fmt.Errorf("failed to watch CDI spec directory %s: %w", s.dir, err)
	}
	defer func() { _ = w.Close() }()
	// Loading after the watch is in place misses no change.
	s.reloadLogged()

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-w.Events():
			if !ok {
				return fmt.Errorf("watching CDI spec directory %s stopped", s.dir)
			}
			timer.Reset(debounce)
		case <-timer.C:
			s.reloadLogged()
		}
	}
}
