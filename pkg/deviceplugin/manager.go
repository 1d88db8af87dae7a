package deviceplugin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/pkg/backoff"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/dpapi"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
	"github.com/dri-cdi/dri-cdi/pkg/watch"
)

// KubeletSocketName is the kubelet's registration socket in the
// device-plugins dir.
const KubeletSocketName = "kubelet.sock"

// Defaults of the Options durations.
const (
	DefaultRegisterTimeout = 5 * time.Second
	DefaultCheckInterval   = 10 * time.Second
	DefaultStopTimeout     = 2 * time.Second
	minBackoff             = 50 * time.Millisecond
	maxBackoff             = 5 * time.Second
)

// DefaultKubeletDir is the kubelet's device-plugins directory on a
// standard node (dpapi.DefaultKubeletDir).
const DefaultKubeletDir = dpapi.DefaultKubeletDir

// Options configure a Manager.
type Options struct {
	// KubeletDir is the kubelet's device-plugins dir, holding kubelet.sock
	// and our sockets.
	KubeletDir string
	// Delivery is how Allocate hands devices over.
	Delivery Delivery
	// Name gives a card's qualified CDI name (needed for cdi-cri).
	Name NameFunc
	// Instance makes socket names unique per agent process; random when
	// empty.
	Instance string
	// RegisterTimeout bounds one Register call.
	RegisterTimeout time.Duration
	// CheckInterval is how often sockets and registration are checked
	// without a directory event, as a safety net for missed events.
	CheckInterval time.Duration
	// StopTimeout bounds how long shutdown waits for open calls.
	StopTimeout time.Duration
	// Log receives the manager's logs.
	Log *logrus.Entry
	// Metrics may be nil.
	Metrics *Metrics
}

// Manager runs one device plugin server per resource and keeps each
// registered with the kubelet, across kubelet restarts.
//
// A resource starts serving when its pool first has a card. A resource
// that later loses all its cards keeps serving an empty list, so that the
// kubelet drops its capacity to zero at once instead of after a grace
// period; it serves again when cards return. Configured pools that never
// had a card are not registered.
type Manager struct {
	opts Options
	log  *logrus.Entry

	mu      sync.Mutex
	plugins map[string]*plugin
	stopped bool

	kick chan struct{}
}

// NewManager checks the options and fills in defaults. Nothing is served
// until Update.
func NewManager(opts Options) (*Manager, error) {
	if opts.KubeletDir == "" {
		return nil, errors.New("kubelet dir is empty")
	}
	if _, err := ParseDelivery(string(opts.Delivery)); err != nil {
		return nil, err
	}
	if opts.Delivery == DeliveryCDICRI && opts.Name == nil {
		return nil, errors.New("delivery cdi-cri needs a CDI name function")
	}
	if opts.Instance == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		opts.Instance = hex.EncodeToString(b)
	}
	if opts.RegisterTimeout <= 0 {
		opts.RegisterTimeout = DefaultRegisterTimeout
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = DefaultStopTimeout
	}
	if opts.Log == nil {
		opts.Log = logging.Discard()
	}
	return &Manager{
		opts:    opts,
		log:     opts.Log.WithField("component", "deviceplugin"),
		plugins: map[string]*plugin{},
		kick:    make(chan struct{}, 1),
	}, nil
}

// SocketPath returns the socket the resource is served on now, empty
// when it is not served.
func (m *Manager) SocketPath(resource string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.plugins[resource]; p != nil {
		return p.socket
	}
	return ""
}

// socketPath is the n-th server's socket of a resource:
// dri-cdi-<resource with unsafe characters as _>-<instance>-<n>.sock in
// the kubelet dir. Long resource names are shortened with a hash. Every
// server gets a new name because the kubelet refuses a socket path it
// holds as connected ("device plugin already connected"), and it may
// hold one we gave up on (see check).
func (m *Manager) socketPath(resource string, n uint64) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, resource)
	if len(name) > 40 {
		sum := sha256.Sum256([]byte(resource))
		name = name[:31] + "-" + hex.EncodeToString(sum[:4])
	}
	return filepath.Join(m.opts.KubeletDir, fmt.Sprintf("%s%s-%s-%d.sock", SocketPrefix, name, m.opts.Instance, n))
}

// serve starts the resource's next server, on a socket name of its own.
func (m *Manager) serve(p *plugin) error {
	p.servers++
	p.socket = m.socketPath(p.resource, p.servers)
	return p.serve()
}

// restart stops the resource's server, closing every connection to it,
// removes its socket if it is still ours, and serves on a new socket.
func (m *Manager) restart(p *plugin) error {
	p.stopServer(0)
	m.setUnregistered(p)
	return m.serve(p)
}

func (m *Manager) kubeletSocket() string { return filepath.Join(m.opts.KubeletDir, KubeletSocketName) }

// Update publishes the pools' devices. Cards in unhealthy are advertised
// Unhealthy. A resource that gets its first card starts serving at once
// and is registered by Run; a serving resource missing from pools keeps
// serving an empty list. Errors name the resources that could not start
// serving; Run retries them.
func (m *Manager) Update(pools []config.Pool, unhealthy map[string]bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return nil
	}
	seen := map[string]bool{}
	var errs []error
	started := false
	for _, pool := range pools {
		seen[pool.Resource] = true
		st := buildState(pool, unhealthy, m.opts.Delivery, m.opts.Name)
		p := m.plugins[pool.Resource]
		if p == nil {
			if len(pool.Cards) == 0 {
				continue
			}
			p = &plugin{
				resource: pool.Resource,
				delivery: m.opts.Delivery,
				log:      m.log.WithField("resource", pool.Resource),
				metrics:  m.opts.Metrics,
				backoff:  backoff.New(minBackoff, maxBackoff),
			}
			m.plugins[pool.Resource] = p
			if pool.Shares > 0 {
				p.log.WithFields(logrus.Fields{"shares": pool.Shares, "replicas": pool.Replicas}).Warn(
					"the pool sets shares, which only DRA nodes use; the device plugin advertises each card replicas times")
			}
			p.setState(st)
			if err := m.serve(p); err != nil {
				errs = append(errs, fmt.Errorf("serve %s: %w", pool.Resource, err))
				m.opts.Metrics.Error("server")
			}
			started = true
		} else {
			p.setState(st)
		}
		m.report(p, st)
	}
	for res, p := range m.plugins {
		if !seen[res] {
			st := buildState(config.Pool{Resource: res, Replicas: 1}, nil, m.opts.Delivery, m.opts.Name)
			p.setState(st)
			m.report(p, st)
		}
	}
	if started {
		m.wake()
	}
	return errors.Join(errs...)
}

func (m *Manager) report(p *plugin, st *state) {
	healthy, unhealthy := 0, 0
	for _, d := range st.list.Devices {
		if d.Health == pluginapi.Healthy {
			healthy++
		} else {
			unhealthy++
		}
	}
	m.opts.Metrics.SetDevices(p.resource, healthy, unhealthy)
}

func (m *Manager) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// Ready returns nil once every served resource is registered with the
// running kubelet, else an error naming the others.
func (m *Manager) Ready() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var missing []string
	for res, p := range m.plugins {
		if !p.registered {
			missing = append(missing, res)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("not registered with the kubelet: %s", strings.Join(missing, ", "))
	}
	return nil
}

// Resources returns the resources being served, sorted.
func (m *Manager) Resources() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.plugins))
}

// Run keeps the servers registered until ctx ends, then stops them
// within the stop timeout and removes their sockets. It watches the
// kubelet dir: when kubelet.sock is re-created, or one of our sockets
// disappears (the kubelet deletes them when it restarts), the servers are
// restarted and registered again.
func (m *Manager) Run(ctx context.Context) error {
	var events <-chan watch.Event
	w, err := watch.NewDirWatcher(m.log, m.opts.KubeletDir)
	if err != nil {
		m.log.WithError(err).Warn("cannot watch the kubelet dir; relying on periodic checks")
		m.opts.Metrics.Error("watch")
	} else {
		defer w.Close()
		events = w.Events()
	}
	ticker := time.NewTicker(m.opts.CheckInterval)
	defer ticker.Stop()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		if next := m.check(ctx); !next.IsZero() {
			retry.Reset(time.Until(next))
		}
		select {
		case <-ctx.Done():
			m.shutdown()
			return nil
		case _, ok := <-events:
			if !ok {
				events = nil
			}
		case <-m.kick:
		case <-ticker.C:
		case <-retry.C:
		}
	}
}

// check restarts servers whose socket is gone and registers every server
// that is not registered with the current kubelet. It returns when the
// next registration retry is due (zero: none pending).
func (m *Manager) check(ctx context.Context) time.Time {
	kid, kerr := statID(m.kubeletSocket())
	now := time.Now()
	var todo []*plugin
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return time.Time{}
	}
	for _, res := range slices.Sorted(maps.Keys(m.plugins)) {
		p := m.plugins[res]
		if !p.socketOK() {
			if p.server != nil {
				p.log.Info("our socket was removed; restarting the server")
			}
			if err := m.restart(p); err != nil {
				p.log.WithError(err).Warn("cannot serve")
				m.opts.Metrics.Error("server")
				continue
			}
		}
		if kerr != nil {
			if p.registered {
				p.log.Info("kubelet socket is gone; waiting for the kubelet")
			}
			m.setUnregistered(p)
			continue
		}
		if p.registered && p.kubeletID == kid {
			continue
		}
		if p.kubeletID == kid && now.Before(p.retryAt) {
			continue
		}
		todo = append(todo, p)
	}
	m.mu.Unlock()

	for _, p := range todo {
		err := m.register(ctx, p)
		m.mu.Lock()
		p.kubeletID = kid
		if err != nil {
			p.registered = false
			first := p.backoff.Current() == 0
			wait := p.backoff.Next()
			p.retryAt = time.Now().Add(wait)
			// Warn once per outage; the retries go to debug and the
			// registrations_total metric.
			if ctx.Err() == nil {
				l := p.log.WithError(err).WithField("retry_in", wait)
				if first {
					l.Warn("registration with the kubelet failed")
				} else {
					l.Debug("registration with the kubelet failed again")
				}
				if reachedKubelet(err) {
					if rerr := m.restart(p); rerr != nil {
						p.log.WithError(rerr).Warn("cannot serve")
						m.opts.Metrics.Error("server")
					}
				}
			}
		} else {
			p.registered = true
			p.backoff.Reset()
			p.log.WithField("socket", filepath.Base(p.socket)).Info("registered with the kubelet")
		}
		m.opts.Metrics.Registration(p.resource, err)
		m.mu.Unlock()
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	var next time.Time
	for _, p := range m.plugins {
		if !p.registered && p.server != nil && !p.retryAt.IsZero() && (next.IsZero() || p.retryAt.Before(next)) {
			next = p.retryAt
		}
	}
	return next
}

// reachedKubelet reports whether a failed Register reached a kubelet.
// Such a kubelet may have dialed the server during the call, and may even
// have stored it after we gave up (it takes its device manager's lock
// with no deadline): it then refuses that socket path for good ("device
// plugin already connected"), and every further attempt on it leaves one
// more connection open (kubelet v1.37 closes none of them). So the next
// attempt goes with a new server on a new socket: stopping the old one
// closes what the kubelet opened, and ends the stream of a registration
// we gave up on, so that the kubelet drops it. Unavailable means the call
// got through to no kubelet (none listens on kubelet.sock), or the
// kubelet died during it, which closed what it had opened.
func reachedKubelet(err error) bool {
	return status.Code(err) != codes.Unavailable
}

func (m *Manager) setUnregistered(p *plugin) {
	if p.registered {
		p.registered = false
		m.opts.Metrics.Unregistered(p.resource)
	}
}

// register announces one server to the kubelet. The kubelet dials back
// and calls GetDevicePluginOptions before it answers.
func (m *Manager) register(ctx context.Context, p *plugin) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.RegisterTimeout)
	defer cancel()
	conn, err := grpc.NewClient("unix:"+m.kubeletSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial kubelet at %s: %w", m.kubeletSocket(), err)
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(p.socket),
		ResourceName: p.resource,
		Options:      &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	})
	if err != nil {
		return fmt.Errorf("register %s with the kubelet at %s: %w", p.resource, m.kubeletSocket(), err)
	}
	return nil
}

// shutdown stops every server in parallel within the stop timeout and
// removes the sockets. Streams end without a last (empty) list.
func (m *Manager) shutdown() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
	var wg sync.WaitGroup
	for _, p := range m.plugins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stopServer(m.opts.StopTimeout)
			m.setUnregistered(p)
		}()
	}
	wg.Wait()
	m.log.Info("device plugin servers stopped")
}
