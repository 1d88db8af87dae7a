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
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/metrics"
	"github.com/dri-cdi/dri-cdi/pkg/nodecheck"
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

// Options configure the agent. Run checks them before it touches
// anything.
type Options struct {
	// Roots are the sysfs and dev trees discovery reads.
	Roots drm.Roots
	// CDIDir receives the CDI spec files.
	CDIDir string
	// KubeletDir is the kubelet's device-plugins dir.
	KubeletDir string
	// ConfigPath is the YAML config; empty means config.Default().
	ConfigPath string
	// Delivery is cdi-cri, nri or device-specs.
	Delivery string
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
	// Log receives the agent's logs.
	Log *logrus.Entry

	// Instance overrides the random socket name suffix (tests).
	Instance string
	// OnMetricsListen, when set, is told the metrics address (tests that
	// listen on port 0).
	OnMetricsListen func(net.Addr)

	// NewBackend, when set, replaces the device plugin manager: the same
	// discovery, spec and reconcile loop then publishes to what it
	// returns (the DRA kubelet plugin, pkg/dra), Delivery is not used,
	// KubeletDir is only checked for existence, and nothing is read from
	// or removed in the device-plugins dir. It is called after the config
	// is loaded and before anything is written; met is the loop's metrics,
	// whose registry the backend may add its own metrics to.
	NewBackend func(cfg *config.Config, met *metrics.Agent) (Backend, error)
}

// Backend is where the loop publishes pools when it is not the device
// plugin manager. Update is called from the loop's goroutine only.
type Backend interface {
	Publisher
	// Ready is nil once the backend serves what it was last given
	// (/readyz).
	Ready() error
	// Run serves until ctx ends; it is started after the first pass.
	Run(ctx context.Context) error
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

// Run is dri-cdi-agent: it checks the options and the config, then
// discovers the cards, writes their CDI specs, serves and registers one
// device plugin per pool, and follows hotplug, driver binding and kubelet
// restarts until ctx ends. An invalid option or config is returned before
// any file is written or socket created.
func Run(ctx context.Context, o Options) error {
	log := o.Log
	if log == nil {
		return errors.New("no logger")
	}
	cfg, err := config.Load(o.ConfigPath)
	if err != nil {
		return err
	}
	var delivery deviceplugin.Delivery
	if o.NewBackend == nil {
		if delivery, err = deviceplugin.ParseDelivery(o.Delivery); err != nil {
			return err
		}
	}
	if o.ResyncInterval <= 0 {
		return fmt.Errorf("invalid resync interval %v: must be > 0", o.ResyncInterval)
	}
	for name, dir := range map[string]string{"sysfs root": o.Roots.Sysfs, "dev root": o.Roots.Dev, "CDI dir": o.CDIDir, "kubelet dir": o.KubeletDir} {
		if dir == "" {
			return fmt.Errorf("%s is empty", name)
		}
	}
	kind := cfg.Kind()
	writer, err := cdi.NewWriter(o.CDIDir, kind, cdi.WithLogger(log.WithField("component", "cdi")))
	if err != nil {
		return err
	}
	met := metrics.NewAgent(o.Version)
	var (
		backend Backend
		mgr     *deviceplugin.Manager
		mode    string
	)
	if o.NewBackend != nil {
		if backend, err = o.NewBackend(cfg, met); err != nil {
			return err
		}
		mode = "backend"
	} else {
		mgr, err = deviceplugin.NewManager(deviceplugin.Options{
			KubeletDir: o.KubeletDir,
			Delivery:   delivery,
			Name:       func(id string) string { return cdi.QualifiedName(kind, id) },
			Instance:   o.Instance,
			Log:        log,
			Metrics:    met,
		})
		if err != nil {
			return err
		}
		backend = deviceManager{Manager: mgr, kubeletDir: o.KubeletDir, served: cfg.ServesResource}
		mode = string(delivery)
	}
	var ln net.Listener
	if o.MetricsAddr != "" {
		if ln, err = metrics.Listen(o.MetricsAddr); err != nil {
			return err
		}
		if o.OnMetricsListen != nil {
			o.OnMetricsListen(ln.Addr())
		}
	}
	log.WithFields(logrus.Fields{
		"sysfsRoot": o.Roots.Sysfs, "devRoot": o.Roots.Dev, "cdiDir": o.CDIDir, "cdiKind": kind,
		"kubeletDir": o.KubeletDir, "delivery": mode, "pools": len(cfg.Pools), "defaultPools": cfg.DefaultPools,
	}).Info("starting discovery and spec loop")

	rec := NewReconciler(cfg, DiscoverFunc(func() (*drm.Inventory, error) { return drm.Discover(o.Roots) }),
		writer, backend, log.WithField("component", "inventory"), met)
	a := &agent{opts: o, rec: rec, mgr: mgr, backend: backend, met: met, log: log,
		paths: newHostPaths(o.Roots.Sysfs, o.KubeletDir, log.WithField("component", "inventory"))}
	if mgr == nil {
		a.paths.kubeletWhat = "the kubelet's plugin registration directory is missing, so the plugin cannot register"
	}
	return a.run(ctx, ln)
}

// errNotReady is returned by the ready check before the first pass.
var errNotReady = errors.New("first discovery not done")

type agent struct {
	opts Options
	rec  *Reconciler
	// mgr is the device plugin manager, nil when a Backend replaces it.
	mgr     *deviceplugin.Manager
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
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := metrics.Handler(a.met.Registry, metrics.Health{Ready: a.Ready, Warnings: a.paths.Warnings})
			h = nodecheck.Mount(h, nodecheck.Agent(a.opts.Roots, a.opts.CDIDir, a.rec.cfg.Kind(), a.opts.KubeletDir, a.mgr != nil))
			if err := metrics.Serve(ctx, ln, h, a.log.WithField("component", "metrics")); err != nil {
				a.log.WithError(err).Error("metrics server failed")
			}
		}()
	}

	// Watch before the first discovery, so that no change between the
	// two goes unseen.
	dri := filepath.Join(a.opts.Roots.Dev, "dri")
	var driEvents <-chan watch.Event
	if w, err := watch.NewDirWatcher(a.log.WithField("component", "watch"), dri, filepath.Join(dri, "by-path")); err != nil {
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

	if a.mgr != nil {
		a.removeStaleSockets()
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
	if a.mgr != nil {
		a.log.WithField("resources", a.mgr.Resources()).Info("first sync done")
	} else {
		a.log.WithField("cards", a.rec.Advertised()).Info("first sync done")
	}

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

// removeStaleSockets cleans up after a crashed agent: it leaves its
// sockets, and the kubelet would keep dialing them.
func (a *agent) removeStaleSockets() {
	if _, err := a.mgr.RemoveStaleSockets(); err != nil {
		a.log.WithError(err).Warn("cannot remove stale device plugin sockets")
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
