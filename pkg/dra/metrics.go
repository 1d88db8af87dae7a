package dra

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dri-cdi/dri-cdi/pkg/metrics"
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
func NewMetrics(reg *prometheus.Registry) *Metrics {
	d := metrics.Definer{Registry: reg, Namespace: ns}
	return &Metrics{
		prepares: d.CounterVec("prepare_claims_total",
			"Claims handled by NodePrepareResources, by result: success, again (already prepared), the reason it was refused, get_claim (not readable from the API server, or replaced), or checkpoint (the call failed reading or saving it).", "result"),
		unprepares: d.CounterVec("unprepare_claims_total",
			"Claims handled by NodeUnprepareResources, by result: success, not_prepared, checkpoint; and checkpoint entries of claims gone from the API server, removed: orphaned.", "result"),
		prepared: d.Gauge("prepared_claims",
			"Claims in the checkpoint after the last prepare or unprepare."),
		devices: d.GaugeVec("devices",
			"Devices in the node's ResourceSlice, by health (unhealthy ones carry the unavailable taint).", "health"),
		publishes: d.CounterVec("publishes_total",
			"Syncs of the node's ResourceSlices with the API server, by result: success (written, or up to date already), error (retried).", "result"),
		errors: d.CounterVec("errors_total",
			"Background errors, by kind: publish (a failed sync, retried), fatal (a gRPC server stopped serving).", "kind"),
	}
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
