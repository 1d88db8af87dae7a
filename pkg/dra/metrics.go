package dra

import (
	"github.com/prometheus/client_golang/prometheus"
)

const ns = "dri_cdi_dra"

// Metrics are the DRA plugin's own metrics; the discovery and spec loop
// keeps the agent's (pkg/metrics). Every method is safe on nil.
type Metrics struct {
	prepares   *prometheus.CounterVec
	unprepares *prometheus.CounterVec
	prepared   prometheus.Gauge
	devices    *prometheus.GaugeVec
	publishes  *prometheus.CounterVec
	errors     *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them in reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		prepares: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "prepare_claims_total",
			Help: "Claims handled by NodePrepareResources, by result: success, again (already prepared), or the reason it was refused.",
		}, []string{"result"}),
		unprepares: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "unprepare_claims_total",
			Help: "Claims handled by NodeUnprepareResources, by result: success, not_prepared, checkpoint.",
		}, []string{"result"}),
		prepared: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Name: "prepared_claims",
			Help: "Claims in the checkpoint after the last prepare or unprepare.",
		}),
		devices: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Name: "devices",
			Help: "Devices in the node's ResourceSlice, by health (unhealthy ones carry the unavailable taint).",
		}, []string{"health"}),
		publishes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "publishes_total",
			Help: "Device sets handed to the ResourceSlice controller, by result.",
		}, []string{"result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Name: "errors_total",
			Help: "Background errors reported by the kubelet plugin helper: publish (recoverable), fatal.",
		}, []string{"kind"}),
	}
	for _, c := range []prometheus.Collector{m.prepares, m.unprepares, m.prepared, m.devices, m.publishes, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) prepare(result string, n int) {
	if m != nil {
		m.prepares.WithLabelValues(result).Add(float64(n))
	}
}

func (m *Metrics) unprepare(result string, n int) {
	if m != nil {
		m.unprepares.WithLabelValues(result).Add(float64(n))
	}
}

func (m *Metrics) setPrepared(n int) {
	if m != nil {
		m.prepared.Set(float64(n))
	}
}

func (m *Metrics) setDevices(byName map[string]Device) {
	if m == nil {
		return
	}
	healthy, unhealthy := 0, 0
	for _, d := range byName {
		if d.Healthy {
			healthy++
		} else {
			unhealthy++
		}
	}
	m.devices.WithLabelValues("healthy").Set(float64(healthy))
	m.devices.WithLabelValues("unhealthy").Set(float64(unhealthy))
}

func (m *Metrics) published(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.publishes.WithLabelValues("error").Inc()
		return
	}
	m.publishes.WithLabelValues("success").Inc()
}

func (m *Metrics) error(kind string) {
	if m != nil {
		m.errors.WithLabelValues(kind).Inc()
	}
}
