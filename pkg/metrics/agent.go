package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const ns = "dri_cdi_agent"

// Agent holds the metrics of dri-cdi-agent.
type Agent struct {
	// Registry holds every metric below plus the Go and process collectors.
	Registry *prometheus.Registry

	devices           *prometheus.GaugeVec
	allocations       *prometheus.CounterVec
	allocationErrors  *prometheus.CounterVec
	preferred         *prometheus.CounterVec
	listAndWatchSends *prometheus.CounterVec
	registrations     *prometheus.CounterVec
	registered        *prometheus.GaugeVec
	specSyncs         *prometheus.CounterVec
	errors            *prometheus.CounterVec
	skipped           prometheus.Gauge
	discoveries       *prometheus.CounterVec
	reconcileSeconds  prometheus.Histogram
}

// NewAgent creates the agent's metrics in a fresh registry.
func NewAgent(version string) *Agent {
	def := NewDefiner(ns)
	a := &Agent{
		Registry:          def.Registry,
		devices:           def.GaugeVec("devices", "Kubelet devices advertised per resource and health (replicas count one each).", "resource", "health"),
		allocations:       def.CounterVec("allocations_total", "Container allocations answered successfully, per resource.", "resource"),
		allocationErrors:  def.CounterVec("allocation_errors_total", "Container allocations refused, per resource and reason.", "resource", "reason"),
		preferred:         def.CounterVec("preferred_allocations_total", "GetPreferredAllocation container requests answered, per resource.", "resource"),
		listAndWatchSends: def.CounterVec("list_and_watch_updates_total", "Device lists sent on ListAndWatch streams, per resource.", "resource"),
		registrations:     def.CounterVec("registrations_total", "Registration attempts with the kubelet, per resource and result (success, error).", "resource", "result"),
		registered:        def.GaugeVec("registered", "1 while the resource is registered with the running kubelet, else 0.", "resource"),
		specSyncs:         def.CounterVec("spec_syncs_total", "CDI spec syncs, by result: changed (files written or removed), unchanged, error.", "result"),
		errors:            def.CounterVec("errors_total", "Errors by component: discovery, specs, watch, uevent, server.", "component"),
		skipped:           def.Gauge("discovery_skipped_entries", "Malformed DRM entries left out by the last discovery."),
		discoveries:       def.CounterVec("discoveries_total", "Discovery passes, by trigger: startup, inotify, uevent, resync, settle, retry.", "trigger"),
		reconcileSeconds:  def.Histogram("reconcile_duration_seconds", "Time from the first change event (or resync) to the updated device lists, including debounce, discovery and spec writes.", []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5}),
	}
	build := def.GaugeVec("build_info", "Always 1; the version label is the agent's version.", "version")
	build.WithLabelValues(version).Set(1)
	return a
}

// SetDevices records how many devices a resource advertises.
func (a *Agent) SetDevices(resource string, healthy, unhealthy int) {
	if a == nil {
		return
	}
	a.devices.WithLabelValues(resource, "healthy").Set(float64(healthy))
	a.devices.WithLabelValues(resource, "unhealthy").Set(float64(unhealthy))
}

// Allocation counts one container allocation.
func (a *Agent) Allocation(resource string) {
	if a != nil {
		a.allocations.WithLabelValues(resource).Inc()
	}
}

// AllocationError counts one refused container allocation.
func (a *Agent) AllocationError(resource, reason string) {
	if a != nil {
		a.allocationErrors.WithLabelValues(resource, reason).Inc()
	}
}

// PreferredAllocation counts one answered preferred-allocation request.
func (a *Agent) PreferredAllocation(resource string) {
	if a != nil {
		a.preferred.WithLabelValues(resource).Inc()
	}
}

// ListAndWatchSent counts one device list sent to the kubelet.
func (a *Agent) ListAndWatchSent(resource string) {
	if a != nil {
		a.listAndWatchSends.WithLabelValues(resource).Inc()
	}
}

// Registration records a registration attempt and the registered state.
func (a *Agent) Registration(resource string, err error) {
	if a == nil {
		return
	}
	if err != nil {
		a.registrations.WithLabelValues(resource, "error").Inc()
		a.registered.WithLabelValues(resource).Set(0)
		return
	}
	a.registrations.WithLabelValues(resource, "success").Inc()
	a.registered.WithLabelValues(resource).Set(1)
}

// Unregistered records that a resource is no longer registered (the
// kubelet went away or its socket was removed).
func (a *Agent) Unregistered(resource string) {
	if a != nil {
		a.registered.WithLabelValues(resource).Set(0)
	}
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
