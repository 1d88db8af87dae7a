// Package metrics holds the Prometheus metrics of dri-cdi-agent and the
// one small HTTP server that exposes /metrics, /healthz and /readyz for
// both dri-cdi-agent and dri-cdi-nri (whose metrics live in package nri).
//
// # Registry
//
// Every metric lives in its own registry (NewAgent), never the global
// one, so tests can build as many agents as they like. The registry also
// carries the Go runtime and process collectors (process_resident_memory_bytes
// is the agent's RSS).
//
// A Definer (NewDefiner) creates and registers each metric in one call;
// the agent's and the NRI plugin's metrics are both defined through it.
//
// Methods on a nil *Agent do nothing, so components can be built without
// metrics in tests.
//
// # HTTP
//
// Serve answers Handler: /metrics from a registry, /healthz with 200 while
// the process runs, and /readyz with 200 once the binary's ready check
// passes (503 and the reason before), followed by its warnings. The
// meaning is the same for both binaries: /healthz is "alive", /readyz is
// "does its job" (the agent: first discovery done and every resource
// registered; the NRI plugin: connected to the runtime, specs loaded and
// watched).
//
// The metric names are listed in docs/metrics.md.
package metrics
