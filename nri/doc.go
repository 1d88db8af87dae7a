// Package nri is the dri-cdi NRI plugin: at container creation it gives a
// container the DRM device nodes, and with them the device-cgroup allow
// rules, of exactly the cards the kubelet allocated to it.
//
// # Trust
//
// A container asks for cards in two ways: the device plugin's allocation
// annotation (pkg/alloc), and CDI device names of our kind that the
// runtime resolves (Container.CDIDevices and cdi.k8s.io/* annotations).
// Neither is trusted. For every container that asks, the plugin asks the
// kubelet's PodResources API (an Authorizer) which device IDs it
// allocated to that container under a resource dri-cdi serves (a
// ResourceFilter), falling back to the kubelet's device manager
// checkpoint (a CheckpointAuthorizer) for regular init containers, which
// PodResources does not report, and:
//
//   - injects the annotated cards the kubelet confirms;
//   - injects none of the annotated cards it does not confirm, logs a
//     warning and counts the container as denied;
//   - fails the container when the runtime already resolved a CDI name of
//     our kind for a card the kubelet did not allocate, because the
//     container would otherwise keep a device it was not given (only where
//     the runtime passes the names: Container.CDIDevices, containerd 2.3
//     and later);
//   - fails the container when the kubelet cannot be asked in time, so the
//     kubelet retries it. Containers that ask for nothing are never failed
//     and never cause any I/O.
//
// # Injection
//
// The nodes of a card come from our CDI spec files (a DeviceSource, see
// SpecIndex), loaded at start and on change, never on the request path.
// Each node becomes ContainerAdjustment.AddDevice; the runtime adds the
// matching "c major:minor rw" allow rule for it. Nodes the runtime's own
// CDI injection already added (same path, same numbers) are skipped, so
// nothing is duplicated; the same path with other numbers is an error.
// The node's owner is what the runtime's CDI injection gives for our spec
// (docs/architecture.md, "Device ownership"): the process's uid, the host
// node's gid (the process's own gid when the host's is 0), the host
// node's mode. No group is added to the process, least of all gid 0.
//
// # Identity
//
// DRM minors are handed out lowest-free, so after an unbind another card
// can hold the numbers a card had, and the kubelet reuses its
// checkpointed allocation when a container restarts. Before a card's
// nodes are injected or confirmed, each DRM node (/dev/dri) and accel
// node (/dev/accel, which has no by-path link) is checked against the
// host (a HostStat): its host path, and for a /dev/dri/by-path node the
// host's link of that name, must be a char device with the spec's
// numbers now. A card whose spec holds no nodes, or whose
// DRI_CDI_UNAVAILABLE marker the runtime's CDI injection set, is
// unavailable. Either fails only that container, with an error naming
// the card. A card missing from the index is reloaded once first
// (SpecIndex.Refresh).
//
// # Device memory
//
// A container whose DRA claims hold shares of cards gets, on top of the
// nodes, the device memory limit of those shares (memory.go): the amount
// each share was allocated comes from dri-cdi-dra's checkpoint (a
// MemorySource, DRACheckpoint), matched by the claim, device and share
// ID PodResources reported for the container; the limit is dmem.max in
// the OCI unified map, set only where package dmem says the kernel will
// take it. Elsewhere nothing is set, the reason is logged once per card
// and counted, and a pool with requireMemoryLimit fails the container
// (ErrMemoryLimit). Only containers with shares of our driver cause this
// I/O.
//
// # hostPath misuse
//
// A container that asks for nothing but bind-mounts /dev/dri or
// /dev/accel, or a node below them, gets a warning explaining the EPERM it will hit and what to
// request instead. It is granted nothing.
//
// # Running
//
// Run is the whole daemon, as dri-cdi-nri's main calls it with the
// Options of NewFlagSet: it builds the PodResources client (the
// Authorizer), the checkpoint reader, the SpecIndex and its watch, and
// the metrics and health server, and runs the plugin until its context
// ends.
//
// # Connection
//
// Plugin.Run connects to the runtime's NRI socket as an external plugin,
// or uses the connection the runtime hands a pre-registered plugin
// (NRI_PLUGIN_SOCKET), and subscribes to CreateContainer only. When the
// runtime restarts it reconnects with a bounded backoff.
package nri
