// Package agent is the discovery, CDI spec and hotplug loop that
// dri-cdi-agent and dri-cdi-dra share: it ties discovery (pkg/drm) and the
// CDI spec writer (cdi) to a Backend that publishes the cards, and keeps
// them in step with the node. The loop is mode-neutral: the device plugin
// (pkg/deviceplugin) and the DRA kubelet plugin (pkg/dra) are Backends
// that each command's main builds and hands to Loop.Run.
//
// # New and Run
//
// New checks the options and loads the config, and returns an error that
// names the bad field before it writes a file or creates a socket; a
// backend is then built from Loop.Config and Loop.Metrics. Run watches
// <dev-root>/dri and kernel uevents, runs a first pass, starts the
// backend and follows changes until its context ends or the backend fails
// for good. A Backend's HostDirs are checked with <sysfs>/class/drm and
// reported on /readyz while missing; a Starter backend runs its own step
// before the first pass, and an InUseReporter's cards in use are seeded
// into it.
//
// # Passes
//
// A Reconciler pass discovers the cards, assigns them to pools and
// publishes specs and device lists in an order that keeps every advertised
// CDI name resolvable: specs grow before the lists do and shrink after
// them. Cards whose driver unbound stay listed as Unhealthy while their
// sysfs device exists.
//
// Change events are coalesced (DefaultDebounce, at most DefaultMaxDelay),
// a pass caused by events is followed by one more shortly after, unhealthy
// cards are re-checked with backoff, failed passes are retried with
// backoff, and a full pass runs every ResyncInterval.
//
// # Example
//
//	loop, err := agent.New(agent.Options{
//		Roots:          drm.DefaultRoots,
//		CDIDir:         cdi.DefaultDir,
//		MetricsAddr:    ":9470",
//		ResyncInterval: agent.DefaultResyncInterval,
//		Log:            log,
//	})
//	if err != nil {
//		return err
//	}
//	backend, err := deviceplugin.NewBackend(loop.Config(), loop.Metrics(), deviceplugin.BackendOptions{
//		KubeletDir: deviceplugin.DefaultKubeletDir, Delivery: "cdi-cri", Log: log,
//	})
//	if err != nil {
//		return err
//	}
//	return loop.Run(ctx, backend)
package agent
