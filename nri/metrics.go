package nri

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dri-cdi/dri-cdi/pkg/dmem"
	"github.com/dri-cdi/dri-cdi/pkg/metrics"
)

// Results of one CreateContainer, the "result" label of
// dri_cdi_nri_handler_duration_seconds.
const (
	resultNone     = "none"     // asked for nothing
	resultVerified = "verified" // allowed cards already present, nothing added
	resultInjected = "injected" // nodes added
	resultDenied   = "denied"   // annotated devices denied, nothing added
	resultError    = "error"    // container failed
)

// Reasons of dri_cdi_nri_errors_total.
const (
	reasonBadRequest     = "bad_request"
	reasonUnconfirmed    = "unconfirmed"
	reasonNotAllocated   = "not_allocated"
	reasonUnknownCard    = "unknown_card"
	reasonDeviceConflict = "device_conflict"
	// reasonCardUnavailable and reasonHostMismatch: see identity.go.
	reasonCardUnavailable = "card_unavailable"
	reasonHostMismatch    = "host_mismatch"
	// reasonMemoryLimit: a required device memory limit cannot be
	// enforced (memory.go).
	reasonMemoryLimit = "memory_limit"
)

// Metrics are the plugin's Prometheus metrics, in their own registry.
type Metrics struct {
	reg *prometheus.Registry

	containers  prometheus.Counter
	injected    prometheus.Counter
	nodes       prometheus.Counter
	denied      prometheus.Counter
	errors      *prometheus.CounterVec
	misuse      prometheus.Counter
	handler     *prometheus.HistogramVec
	podres      *prometheus.HistogramVec
	connected   prometheus.Gauge
	reconnects  prometheus.Counter
	specCards   prometheus.Gauge
	specReloads *prometheus.CounterVec
	// spec index freshness (specindex_fresh.go)
	specWatching      prometheus.Gauge
	specWatchFailures prometheus.Counter
	specRefreshes     prometheus.Counter
	// device memory limits (memory.go)
	memoryLimited       prometheus.Counter
	memoryUnenforceable *prometheus.CounterVec

	// pre-resolved children, so the request path does no label lookups
	handlerByResult map[string]prometheus.Observer
	podresOK        prometheus.Observer
	podresError     prometheus.Observer
}

// NewMetrics creates the metrics in a new registry that also holds the Go
// runtime and process collectors.
func NewMetrics() *Metrics {
	def := metrics.NewDefiner("dri_cdi_nri")
	m := &Metrics{
		reg:               def.Registry,
		containers:        def.Counter("containers_total", "Containers seen at CreateContainer."),
		injected:          def.Counter("containers_injected_total", "Containers the plugin added device nodes to."),
		nodes:             def.Counter("device_nodes_injected_total", "Device nodes added to containers (each with its cgroup allow rule)."),
		denied:            def.Counter("containers_denied_total", "Containers whose allocation annotation named devices the kubelet did not allocate to them."),
		errors:            def.CounterVec("errors_total", "Containers whose creation the plugin failed, by reason.", "reason"),
		misuse:            def.Counter("hostpath_misuse_total", "Containers that bind-mount /dev/dri without requesting a GPU resource."),
		handler:           def.HistogramVec("handler_duration_seconds", "Time spent handling CreateContainer, by result.", prometheus.ExponentialBuckets(5e-6, 4, 10), "result"),
		podres:            def.HistogramVec("podresources_duration_seconds", "Time spent asking the kubelet PodResources API, by result (ok or error).", prometheus.ExponentialBuckets(1e-4, 2.5, 10), "result"),
		connected:         def.Gauge("connected", "1 while the plugin is registered and synchronized with the runtime."),
		reconnects:        def.Counter("reconnects_total", "Connection attempts to the runtime after a failed attempt or a lost connection."),
		specCards:         def.Gauge("cdi_cards", "Cards described by the CDI specs of our kind, as last loaded."),
		specReloads:       def.CounterVec("cdi_reloads_total", "Loads of the CDI spec directory, by result (ok or error).", "result"),
		specWatching:      def.Gauge("cdi_watching", "1 while the CDI spec directory is watched, 0 after the watch failed to start or stopped."),
		specWatchFailures: def.Counter("cdi_watch_failures_total", "Times the watch of the CDI spec directory failed to start or stopped."),
		specRefreshes:     def.Counter("cdi_refreshes_total", "Reloads of the CDI spec directory because a container's allocated card was missing from the store."),
		memoryLimited:     def.Counter("memory_limits_total", "Containers given a device memory limit (dmem.max) for their shares of cards."),
		memoryUnenforceable: def.CounterVec("memory_limits_unenforceable_total",
			"Cards of containers whose shares were allocated device memory that the node cannot limit, by reason.", "reason"),
	}
	m.handlerByResult = map[string]prometheus.Observer{}
	for _, r := range []string{resultNone, resultVerified, resultInjected, resultDenied, resultError} {
		m.handlerByResult[r] = m.handler.WithLabelValues(r)
	}
	for _, r := range []string{reasonBadRequest, reasonUnconfirmed, reasonNotAllocated, reasonUnknownCard, reasonDeviceConflict,
		reasonCardUnavailable, reasonHostMismatch, reasonMemoryLimit} {
		m.errors.WithLabelValues(r)
	}
	for _, r := range dmem.Reasons {
		m.memoryUnenforceable.WithLabelValues(r)
	}
	m.podresOK = m.podres.WithLabelValues("ok")
	m.podresError = m.podres.WithLabelValues("error")
	m.specReloads.WithLabelValues("ok")
	m.specReloads.WithLabelValues("error")
	return m
}

// Registry returns the registry holding the metrics.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

func (m *Metrics) observeHandler(result string, d time.Duration) {
	m.handlerByResult[result].Observe(d.Seconds())
}

func (m *Metrics) observePodResources(err error, d time.Duration) {
	if err != nil {
		m.podresError.Observe(d.Seconds())
		return
	}
	m.podresOK.Observe(d.Seconds())
}

func (m *Metrics) setConnected(on bool) {
	if on {
		m.connected.Set(1)
		return
	}
	m.connected.Set(0)
}
