// Package agent is dri-cdi-agent: it ties discovery (pkg/drm), the CDI
// spec writer (cdi) and the device plugin servers (pkg/deviceplugin)
// together and keeps them in step with the node.
//
// # Run
//
// Run checks the options and the config first and returns an error that
// names the bad field before it writes a file or creates a socket. Then it
// watches <dev-root>/dri and kernel uevents, runs a first pass, starts
// registering with the kubelet and follows changes until its context
// ends.
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
//	err := agent.Run(ctx, agent.Options{
//		Roots:          drm.DefaultRoots,
//		CDIDir:         cdi.DefaultDir,
//		KubeletDir:     deviceplugin.DefaultKubeletDir,
//		Delivery:       string(deviceplugin.DeliveryCDICRI),
//		MetricsAddr:    ":9470",
//		ResyncInterval: agent.DefaultResyncInterval,
//		Log:            log,
//	})
package agent
