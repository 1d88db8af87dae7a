package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
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
	a := &Agent{
		Registry: prometheus.NewRegistry(),
		devices: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "devices",
			Help: "Kubelet devices advertised per resource and health (replicas count one each).",
		}, []string{"resource", "health"}),
		allocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "allocations_total",
			Help: "Container allocations answered successfully, per resource.",
		}, []string{"resource"}),
		allocationErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "allocation_errors_total",
			Help: "Container allocations refused, per resource and reason.",
		}, []string{"resource", "reason"}),
		preferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "preferred_allocations_total",
			Help: "GetPreferredAllocation container requests answered, per resource.",
		}, []string{"resource"}),
		listAndWatchSends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "list_and_watch_updates_total",
			Help: "Device lists sent on ListAndWatch streams, per resource.",
		}, []string{"resource"}),
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "registrations_total",
			Help: "Registration attempts with the kubelet, per resource and result (success, error).",
		}, []string{"resource", "result"}),
		registered: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "registered",
			Help: "1 while the resource is registered with the running kubelet, else 0.",
		}, []string{"resource"}),
		specSyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "spec_syncs_total",
			Help: "CDI spec syncs, by result: changed (files written or removed), unchanged, error.",
		}, []string{"result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "errors_total",
			Help: "Errors by component: discovery, specs, watch, uevent, server.",
		}, []string{"component"}),
		skipped: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Name: "discovery_skipped_entries",
			Help: "Malformed DRM entries left out by the last discovery.",
		}),
		discoveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "discoveries_total",
			Help: "Discovery passes, by trigger: startup, inotify, uevent, resync, settle, retry.",
		}, []string{"trigger"}),
		reconcileSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Name: "reconcile_duration_seconds",
			Help:    "Time from the first change event (or resync) to the updated device lists, including debounce, discovery and spec writes.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: ns, Name: "build_info", Help: "Always 1; the version label is the agent's version.",
	}, []string{"version"})
	build.WithLabelValues(version).Set(1)
	a.Registry.MustRegister(
		a.devices, a.allocations, a.allocationErrors, a.preferred, a.listAndWatchSends,
		a.registrations, a.registered, a.specSyncs, a.errors, a.skipped, a.discoveries,
		a.reconcileSeconds, build,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
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
