package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Definer creates the metrics of one namespace and registers them in one
// registry, so that each metric is defined and registered in one place
// and none can be left out of the registry.
type Definer struct {
	// Registry receives every metric the Definer creates.
	Registry *prometheus.Registry
	// Namespace starts every metric name: "dri_cdi_agent", "dri_cdi_nri".
	Namespace string
}

// NewDefiner returns a Definer of namespace with a fresh registry that
// also holds the Go runtime and process collectors (go_*, process_*).
func NewDefiner(namespace string) Definer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return Definer{Registry: reg, Namespace: namespace}
}

// Counter creates and registers a counter.
func (d Definer) Counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: d.Namespace, Name: name, Help: help})
	d.Registry.MustRegister(c)
	return c
}

// CounterVec creates and registers a counter with labels.
func (d Definer) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: d.Namespace, Name: name, Help: help}, labels)
	d.Registry.MustRegister(c)
	return c
}

// Gauge creates and registers a gauge.
func (d Definer) Gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: d.Namespace, Name: name, Help: help})
	d.Registry.MustRegister(g)
	return g
}

// GaugeVec creates and registers a gauge with labels.
func (d Definer) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: d.Namespace, Name: name, Help: help}, labels)
	d.Registry.MustRegister(g)
	return g
}

// Histogram creates and registers a histogram with the given buckets.
func (d Definer) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: d.Namespace, Name: name, Help: help, Buckets: buckets})
	d.Registry.MustRegister(h)
	return h
}

// HistogramVec creates and registers a histogram with labels.
func (d Definer) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: d.Namespace, Name: name, Help: help, Buckets: buckets}, labels)
	d.Registry.MustRegister(h)
	return h
}
