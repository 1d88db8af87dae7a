package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/metrics"
	"github.com/dri-cdi/dri-cdi/pkg/nodecheck"
	"github.com/dri-cdi/dri-cdi/pkg/usage"
	"github.com/dri-cdi/dri-cdi/pkg/watch"
)

// Defaults of Options.
const (
	// DefaultResyncInterval is the default period of the full rescan.
	DefaultResyncInterval = 5 * time.Minute
	// DefaultDebounce is the quiet time after a change event before a
	// rescan; more events within it join the same rescan.
	DefaultDebounce = 20 * time.Millisecond
	// DefaultMaxDelay caps how long a stream of events can postpone a
	// rescan.
	DefaultMaxDelay = 100 * time.Millisecond
	maxRetry        = 30 * time.Second
	// minSettle and maxSettle bound the re-checks while a card is
	// Unhealthy: a removal takes the nodes first and the sysfs device
	// last, and without a uevent nothing else announces the last step.
	minSettle = 250 * time.Millisecond
	maxSettle = 30 * time.Second
	// echoDelay is when one more pass follows a pass caused by change
	// events: a change can finish after its last event (udev adding a
	// by-path link, sysfs catching up), and nothing else would announce
	// it before the resync.
	echoDelay = 100 * time.Millisecond
)

// Options configure the discovery and spec loop, the part dri-cdi-agent
// and dri-cdi-dra share. New checks them before it touches anything.
type Options struct {
	// Roots are the sysfs and dev trees discovery reads.
	Roots drm.Roots
	// CDIDir receives the CDI spec files.
	CDIDir string
	// ConfigPath is the YAML config; empty means config.Default().
	ConfigPath string
	// MetricsAddr serves /metrics, /healthz and /readyz; empty disables.
	MetricsAddr string
	// ResyncInterval is the period of the full rescan that backs up
	// inotify and uevents.
	ResyncInterval time.Duration
	// Debounce and MaxDelay shape how change events are coalesced; zero
	// means the defaults.
	Debounce, MaxDelay time.Duration
	// Version is reported by the build_info metric.
	Version string
	// Usage configures the per-container GPU usage scans (off by default).
	Usage usage.Config
	// Log receives the loop's logs.
	Log *logrus.Entry
	// OnMetricsListen, when set, is told the metrics address once the
	// server listens (an embedder or a test that listens on port 0).
	OnMetricsListen func(net.Addr)
}

// Backend is where the loop publishes pools: the device plugin manager
// (pkg/deviceplugin) or the DRA kubelet plugin (pkg/dra). main builds
// one and hands it to Loop.Run; the loop never asks which it is. Update
// is called from the loop's goroutine only.
type Backend interface {
	Publisher
	// Ready is nil once the backend serves what it was last given
	// (/readyz).
	Ready() error
	// Run serves until ctx ends; it is started after the first pass.
	Run(ctx context.Context) error
	// HostDirs are the host directories the backend needs; the loop
	// warns (log and /readyz) while one is missing.
	HostDirs() []HostDir
}

// HostDir is a host directory a backend needs, and what its absence
// means for the node.
type HostDir struct {
	// Path of the directory.
	Path string
	// Missing says what follows when it does not exist.
	Missing string
}

// DevicePluginBackend is a Backend that registers with the kubelet's
// device plugin directory: the doctor checks the daemon serves (/doctor)
// then include that directory's kubelet socket.
type DevicePluginBackend interface {
	DevicePluginDir() string
}

// Starter is a Backend with work to do once before the first pass (the
// device plugin removes the sockets a crashed agent left).
type Starter interface {
	BeforeFirstPass()
}

// InUseReporter is a Backend that keeps, in a record that outlives the
// agent, which cards workloads hold: for the device plugin the kubelet's
// device manager checkpoint, for the DRA driver its checkpoint of
// prepared claims. The agent reads it once at start (SeedUnbound): a held
// card that is unbound then stays listed, Unhealthy and without device
// nodes, as if the agent had watched it unbind, instead of vanishing;
// after an unbind DRM minors can be renumbered, and a held card must
// never be confused with the card that took its numbers.
type InUseReporter interface {
	// CardsInUse returns, for every card held now, the resource (pool)
	// it was handed out from, or "" when the record does not say. A
	// missing record holds nothing.
	CardsInUse() (map[string]string, error)
}

// Loop is the discovery, spec and hotplug loop with its options checked
// and its config loaded: what a backend is built from (Config, Metrics)
// before Run hands the loop to it.
type Loop struct {
	opts   Options
	cfg    *config.Config
	writer *cdi.Writer
	met    *metrics.Agent
}

// New checks the options and loads the config. An invalid option or
// config is returned before any file is written or socket created.
func New(o Options) (*Loop, error) {
	if o.Log == nil {
		return nil, errors.New("no logger")
	}
	cfg, err := config.Load(o.ConfigPath)
	if err != nil {
		return nil, err
	}
	if o.ResyncInterval <= 0 {
		return nil, fmt.Errorf("invalid resync interval %v: must be > 0", o.ResyncInterval)
	}
	if err := o.Usage.Validate(); err != nil {
		return nil, err
	}
	for name, dir := range map[string]string{"sysfs root": o.Roots.Sysfs, "dev root": o.Roots.Dev, "CDI dir": o.CDIDir} {
		if dir == "" {
			return nil, fmt.Errorf("%s is empty", name)
		}
	}
	writer, err := cdi.NewWriter(o.CDIDir, cfg.Kind(), cdi.WithLogger(o.Log.WithField("component", "cdi")))
	if err != nil {
		return nil, err
	}
	return &Loop{opts: o, cfg: cfg, writer: writer, met: metrics.NewAgent(o.Version)}, nil
}

// Config is the loaded config.
func (l *Loop) Config() *config.Config { return l.cfg }

// Metrics are the loop's metrics; a backend adds its own to their
// Registry, so that one endpoint serves both.
func (l *Loop) Metrics() *metrics.Agent { return l.met }

// Run discovers the cards, writes their CDI specs, publishes them to
// backend, and follows hotplug, driver binding and the backend's own
// events until ctx ends or the backend fails for good.
func (l *Loop) Run(ctx context.Context, backend Backend) error {
	if backend == nil {
		return errors.New("no backend")
	}
	o, log := l.opts, l.opts.Log
	var ln net.Listener
	if o.MetricsAddr != "" {
		var err error
		if ln, err = metrics.Listen(o.MetricsAddr); err != nil {
			return err
		}
		if o.OnMetricsListen != nil {
			o.OnMetricsListen(ln.Addr())
		}
	}
	log.WithFields(logrus.Fields{
		"sysfsRoot": o.Roots.Sysfs, "devRoot": o.Roots.Dev, "cdiDir": o.CDIDir, "cdiKind": l.cfg.Kind(),
		"pools": len(l.cfg.Pools), "defaultPools": l.cfg.DefaultPools,
	}).Info("starting discovery and spec loop")

	rec := NewReconciler(l.cfg, DiscoverFunc(func() (*drm.Inventory, error) { return l.cfg.Discover(o.Roots) }),
		l.writer, backend, log.WithField("component", "inventory"), l.met)
	a := &agent{opts: o, rec: rec, backend: backend, met: l.met, log: log,
		paths: newHostPaths(o.Roots.Sysfs, backend.HostDirs(), log.WithField("component", "inventory"))}
	return a.run(ctx, ln)
}

// nodeCheck is the doctor checks the daemon serves at /doctor: its cards
// and CDI specs, and the kubelet's device plugin socket when the backend
// registers there.
func (a *agent) nodeCheck() *nodecheck.Handler {
	dir, dp := "", false
	if b, ok := a.backend.(DevicePluginBackend); ok {
		dir, dp = b.DevicePluginDir(), true
	}
	return nodecheck.Agent(a.opts.Roots, a.opts.CDIDir, a.rec.cfg.Kind(), dir, dp)
}

// warnings are what /readyz reports without failing: missing host
// directories and a spec directory that cannot be written.
func (a *agent) warnings() []string {
	return append(a.paths.Warnings(), a.rec.SpecWarnings()...)
}

// errNotReady is returned by the ready check before the first pass.
var errNotReady = errors.New("first discovery not done")

type agent struct {
	opts    Options
	rec     *Reconciler
	backend Backend
	met     *metrics.Agent
	log     *logrus.Entry
	ready   atomic.Bool
	// paths warns about missing host directories (hostpaths.go).
	paths *hostPaths
}

// Ready returns nil once the first pass is done and every resource is
// registered.
func (a *agent) Ready() error {
	if !a.ready.Load() {
		return errNotReady
	}
	return a.backend.Ready()
}

func (a *agent) run(ctx context.Context, ln net.Listener) error {
	// Deferred in this order so that cancel runs before Wait.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if ln != nil {
		h := metrics.Handler(a.met.Registry, metrics.Health{Ready: a.Ready, Warnings: a.warnings})
		h = nodecheck.Mount(h, a.nodeCheck())
		metrics.Start(ctx, &wg, ln, h, a.log.WithField("component", "metrics"))
	}
	a.startUsage(ctx, &wg)

	// Watch before the first discovery, so that no change between the
	// two goes unseen.
	dri := filepath.Join(a.opts.Roots.Dev, "dri")
	accel := filepath.Join(a.opts.Roots.Dev, drm.ClassAccel)
	var driEvents <-chan watch.Event
	if w, err := watch.NewDirWatcher(a.log.WithField("component", "watch"), dri, filepath.Join(dri, "by-path"), accel); err != nil {
		a.met.Error("watch")
		a.log.WithError(err).Warn("cannot watch the DRM device dir; relying on uevents and resync")
	} else {
		defer w.Close()
		driEvents = w.Events()
	}
	var uevents <-chan watch.Uevent
	if u, err := watch.ListenUevents(a.log.WithField("component", "uevent")); err != nil {
		a.met.Error("uevent")
		a.log.WithError(err).Warn("no kernel uevents; relying on inotify and resync")
	} else {
		defer u.Close()
		uevents = u.Events()
	}

	if s, ok := a.backend.(Starter); ok {
		s.BeforeFirstPass()
	}
	unseeded := a.seedInUse()
	start := time.Now()
	a.paths.check()
	if err := a.rec.Reconcile("startup"); err != nil {
		return fmt.Errorf("first sync: %w", err)
	}
	a.warnUnlisted(unseeded)
	a.met.Reconciled(time.Since(start))
	a.ready.Store(true)
	a.log.WithField("cards", a.rec.Advertised()).Info("first sync done")

	// A backend that fails for good ends the process: a plugin that
	// cannot serve must not look alive to the DaemonSet.
	backendErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.backend.Run(ctx); err != nil && ctx.Err() == nil {
			backendErr <- err
			cancel()
		}
	}()

	a.loop(ctx, driEvents, uevents)
	a.log.Info("stopping")
	select {
	case err := <-backendErr:
		return fmt.Errorf("publisher: %w", err)
	default:
		return nil
	}
}

// seedInUse learns from a backend that records them which cards
// workloads hold, so that the first pass keeps one that is unbound now
// listed (Reconciler.SeedUnbound). It returns the held cards that cannot
// be seeded: the record names no resource the config serves.
func (a *agent) seedInUse() (unseeded []string) {
	r, ok := a.backend.(InUseReporter)
	if !ok {
		return nil
	}
	held, err := r.CardsInUse()
	if err != nil {
		a.log.WithError(err).Warn("cannot read which cards are in use; a card unbound at start is not listed")
		return nil
	}
	seeded, unseeded := a.rec.SeedUnbound(held, a.opts.Roots.Sysfs)
	if len(seeded) > 0 {
		a.log.WithField("cards", seeded).Debug("cards in use, checked in the first pass")
	}
	return unseeded
}

// warnUnlisted warns about each held card that could not be seeded and
// that the first pass did not list: it is unbound, and a workload still
// names it.
func (a *agent) warnUnlisted(unseeded []string) {
	listed := a.rec.Advertised()
	for _, id := range unseeded {
		if !slices.Contains(listed, id) {
			a.log.WithField("card", id).Warn(msgUnlisted)
		}
	}
}

// msgUnlisted is the warning about a held card warnUnlisted finds.
const msgUnlisted = "a card in use is unbound and not listed until it binds again: its record names no resource the config serves (a record of an earlier version, or a pool removed from the config)"
