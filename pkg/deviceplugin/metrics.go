package deviceplugin

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dri-cdi/dri-cdi/pkg/metrics"
)

// Metrics are the device plugin's own metrics, registered next to the
// discovery and spec loop's (pkg/metrics, namespace dri_cdi_agent) and
// counting its errors in the loop's errors_total. Every method is safe
// on nil.
type Metrics struct {
	loop              *metrics.Agent
	devices           *prometheus.GaugeVec
	allocations       *prometheus.CounterVec
	allocationErrors  *prometheus.CounterVec
	preferred         *prometheus.CounterVec
	listAndWatchSends *prometheus.CounterVec
	registrations     *prometheus.CounterVec
	registered        *prometheus.GaugeVec
}

// NewMetrics creates the device plugin's metrics in loop's registry.
func NewMetrics(loop *metrics.Agent) *Metrics {
	def := metrics.Definer{Registry: loop.Registry, Namespace: metrics.AgentNamespace}
	return &Metrics{
		loop:              loop,
		devices:           def.GaugeVec("devices", "Kubelet devices advertised per resource and health (replicas count one each).", "resource", "health"),
		allocations:       def.CounterVec("allocations_total", "Container allocations answered successfully, per resource.", "resource"),
		allocationErrors:  def.CounterVec("allocation_errors_total", "Container allocations refused, per resource and reason.", "resource", "reason"),
		preferred:         def.CounterVec("preferred_allocations_total", "GetPreferredAllocation container requests answered, per resource.", "resource"),
		listAndWatchSends: def.CounterVec("list_and_watch_updates_total", "Device lists sent on ListAndWatch streams, per resource.", "resource"),
		registrations:     def.CounterVec("registrations_total", "Registration attempts with the kubelet, per resource and result (success, error).", "resource", "result"),
		registered:        def.GaugeVec("registered", "1 while the resource is registered with the running kubelet, else 0.", "resource"),
	}
}

// SetDevices records how many devices a resource advertises.
func (m *Metrics) SetDevices(resource string, healthy, unhealthy int) {
	if m == nil {
		return
	}
	m.devices.WithLabelValues(resource, "healthy").Set(float64(healthy))
	m.devices.WithLabelValues(resource, "unhealthy").Set(float64(unhealthy))
}

// Allocation counts one container allocation.
func (m *Metrics) Allocation(resource string) {
	if m != nil {
		m.allocations.WithLabelValues(resource).Inc()
	}
}

// AllocationError counts one refused container allocation.
func (m *Metrics) AllocationError(resource, reason string) {
	if m != nil {
		m.allocationErrors.WithLabelValues(resource, reason).Inc()
	}
}

// PreferredAllocation counts one answered preferred-allocation request.
func (m *Metrics) PreferredAllocation(resource string) {
	if m != nil {
		m.preferred.WithLabelValues(resource).Inc()
	}
}

// ListAndWatchSent counts one device list sent to the kubelet.
func (m *Metrics) ListAndWatchSent(resource string) {
	if m != nil {
		m.listAndWatchSends.WithLabelValues(resource).Inc()
	}
}

// Registration records a registration attempt and the registered state.
func (m *Metrics) Registration(resource string, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.registrations.WithLabelValues(resource, "error").Inc()
		m.registered.WithLabelValues(resource).Set(0)
		return
	}
	m.registrations.WithLabelValues(resource, "success").Inc()
	m.registered.WithLabelValues(resource).Set(1)
}

// Unregistered records that a resource is no longer registered (the
// kubelet went away or its socket was removed).
func (m *Metrics) Unregistered(resource string) {
	if m != nil {
		m.registered.WithLabelValues(resource).Set(0)
	}
}

// Error counts one error of a component of the device plugin (server,
// watch) in the loop's errors_total.
func (m *Metrics) Error(component string) {
	if m != nil {
		m.loop.Error(component)
	}
}
