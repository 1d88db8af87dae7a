package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// AgentNamespace starts the name of every metric of the discovery and spec
// loop and of the device plugin: dri_cdi_agent_*.
const AgentNamespace = "dri_cdi_agent"

// Agent holds the metrics of the discovery and spec loop that
// dri-cdi-agent and dri-cdi-dra share (namespace dri_cdi_agent); each
// backend registers its own next to them in Registry (pkg/deviceplugin,
// pkg/dra).
type Agent struct {
	// Registry holds every metric below plus the Go and process collectors.
	Registry *prometheus.Registry

	specSyncs        *prometheus.CounterVec
	errors           *prometheus.CounterVec
	skipped          prometheus.Gauge
	discoveries      *prometheus.CounterVec
	reconcileSeconds prometheus.Histogram
}

// NewAgent creates the loop's metrics in a fresh registry.
func NewAgent(version string) *Agent {
	def := NewDefiner(AgentNamespace)
	a := &Agent{
		Registry:         def.Registry,
		specSyncs:        def.CounterVec("spec_syncs_total", "CDI spec syncs, by result: changed (files written or removed), unchanged, error.", "result"),
		errors:           def.CounterVec("errors_total", "Errors by component: discovery, specs, watch, uevent, server.", "component"),
		skipped:          def.Gauge("discovery_skipped_entries", "Malformed DRM entries left out by the last discovery."),
		discoveries:      def.CounterVec("discoveries_total", "Discovery passes, by trigger: startup, inotify, uevent, resync, settle, retry.", "trigger"),
		reconcileSeconds: def.Histogram("reconcile_duration_seconds", "Time from the first change event (or resync) to the updated device lists, including debounce, discovery and spec writes.", []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5}),
	}
	build := def.GaugeVec("build_info", "Always 1; the version label is the agent's version.", "version")
	build.WithLabelValues(version).Set(1)
	return a
}

// SpecSync records one CDI spec sync.
func (a *Agent) SpecSync(changed bool, err error) {
	if a == nil {
		return
	}
	switch {
	case err != nil:
		a.specSyncs.WithLabelValues("error").Inc()
	case changed:
		a.specSyncs.WithLabelValues("changed").Inc()
	default:
		a.specSyncs.WithLabelValues("unchanged").Inc()
	}
}

// Error counts one error of a component.
func (a *Agent) Error(component string) {
	if a != nil {
		a.errors.WithLabelValues(component).Inc()
	}
}

// Discovery records one discovery pass and how many entries it skipped.
func (a *Agent) Discovery(trigger string, skipped int) {
	if a == nil {
		return
	}
	a.discoveries.WithLabelValues(trigger).Inc()
	a.skipped.Set(float64(skipped))
}

// Reconciled records the time from the first change event to the
// updated device lists.
func (a *Agent) Reconciled(d time.Duration) {
	if a != nil {
		a.reconcileSeconds.Observe(d.Seconds())
	}
}
