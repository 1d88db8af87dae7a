// Package deviceplugin serves DRM cards to the kubelet through the device
// plugin API (v1beta1): one gRPC server and one registration per
// resource (pool).
//
// # Devices
//
// A pool advertises each card once with its stable card ID, or Replicas
// times as "<card ID>::<n>" (see pkg/alloc). Every ListAndWatch message
// carries the whole list, sorted, with the card's NUMA node as topology
// when known. Cards the caller marks unhealthy stay listed as Unhealthy.
//
// # Allocate
//
// Allocate answers from a snapshot computed when the inventory changes;
// it reads no files. Every container gets the allocation annotation
// (pkg/alloc.Annotation) and, by Delivery:
//
//   - cdi-cri: one CDI device name per card (replicas of a card share it);
//   - nri: nothing else, the NRI plugin injects the nodes;
//   - device-specs: a DeviceSpec (rw) for every node of each card.
//
// Unknown, duplicated and unhealthy IDs are refused, and so are two
// replicas of one card in one container unless the pool allows it.
//
// # GetPreferredAllocation
//
// Must-include IDs come first; then distinct physical cards before a
// second replica of a chosen card; then cards on one NUMA node; then the
// least loaded card.
//
// # Lifecycle
//
// Manager serves a resource on
// <kubelet dir>/dri-cdi-<resource>-<instance>-<n>.sock as soon as its pool
// has a card, then registers it with kubelet.sock (the kubelet dials back
// first, so the server is up before Register). It watches the kubelet dir
// with inotify: when kubelet.sock is a new file, or our socket is gone
// (the kubelet deletes every socket when it restarts), the server is
// restarted and registered again, retrying with backoff. Every server
// gets a new socket name (<n> counts them): the kubelet refuses a socket
// path it holds as connected, and a Register that failed after reaching
// the kubelet (our deadline passed while it was busy) may have left it
// holding ours, with connections to our server. Such a failure therefore
// stops the server, which closes those connections and ends a stream the
// kubelet may hold, and the next attempt goes with a new one. A resource that
// loses all its cards keeps serving an empty list. On shutdown the
// streams end without a last message, so the kubelet never receives an
// empty list because the agent stops.
//
// # dri-cdi-agent
//
// Run is dri-cdi-agent: it builds the discovery and spec loop
// (pkg/agent), then a Backend for it, and runs the loop with that
// backend. The Backend owns what only the device plugin needs: the
// Manager, the removal of sockets a crashed agent left (before the first
// pass), the warning while the kubelet's device plugin directory is
// missing, the cards in use from the kubelet's device manager checkpoint,
// and its metrics (Metrics, next to the loop's in one registry). The flags
// are NewFlagSet's.
package deviceplugin
