// Package metrics holds the Prometheus metrics of dri-cdi-agent and the
// small HTTP server that exposes /metrics, /healthz and /readyz.
//
// # Registry
//
// Every metric lives in its own registry (NewAgent), never the global
// one, so tests can build as many agents as they like. The registry also
// carries the Go runtime and process collectors (process_resident_memory_bytes
// is the agent's RSS).
//
// Methods on a nil *Agent do nothing, so components can be built without
// metrics in tests.
//
// # HTTP
//
// Serve answers /metrics from the registry, /healthz with 200 while the
// process runs, and /readyz with 200 once the ready check passes (503 and
// the reason before).
//
// The metric names are listed in docs/metrics.md.
package metrics
