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
	return register(d, prometheus.NewCounter(prometheus.CounterOpts(d.opts(name, help))))
}

// CounterVec creates and registers a counter with labels.
func (d Definer) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return register(d, prometheus.NewCounterVec(prometheus.CounterOpts(d.opts(name, help)), labels))
}

// Gauge creates and registers a gauge.
func (d Definer) Gauge(name, help string) prometheus.Gauge {
	return register(d, prometheus.NewGauge(prometheus.GaugeOpts(d.opts(name, help))))
}

// GaugeVec creates and registers a gauge with labels.
func (d Definer) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return register(d, prometheus.NewGaugeVec(prometheus.GaugeOpts(d.opts(name, help)), labels))
}

// Histogram creates and registers a histogram with the given buckets.
func (d Definer) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return register(d, prometheus.NewHistogram(d.histogramOpts(name, help, buckets)))
}

// HistogramVec creates and registers a histogram with labels.
func (d Definer) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return register(d, prometheus.NewHistogramVec(d.histogramOpts(name, help, buckets), labels))
}

func (d Definer) opts(name, help string) prometheus.Opts {
	return prometheus.Opts{Namespace: d.Namespace, Name: name, Help: help}
}

func (d Definer) histogramOpts(name, help string, buckets []float64) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Namespace: d.Namespace, Name: name, Help: help, Buckets: buckets}
}

func register[C prometheus.Collector](d Definer, c C) C {
	d.Registry.MustRegister(c)
	return c
}
