// Package harness runs a real single-node Kubernetes runtime path on the
// local machine for end-to-end tests: containerd with runc, a standalone
// kubelet serving static pods, and the dri-cdi agent and NRI plugin as
// host processes, all on private paths, against a fake DRM device tree.
//
// # Lifecycle
//
// A Suite is created once per process (NewSuite). It takes a machine-wide
// lock, because the kubelet always serves its device-plugin registration
// socket from /var/lib/kubelet/device-plugins; it cleans up what a crashed
// earlier run left behind, probes the host's quirks and builds the pause
// and busybox images. Suite.StartNode then starts one node: containerd,
// the kubelet and, as asked, the agent and the NRI plugin. Node.Close
// tears it down in order: pods first (manifests removed, then crictl stopp
// and rmp), the dri-cdi processes, the kubelet, containerd, leftover shims
// and container processes, mounts, cgroups, and the files the run left in
// the shared device-plugin directory. Close runs on every path: test
// cleanup, errors, and SIGINT/SIGTERM (InstallSignalHandler).
//
// # Quirks
//
// The harness applies a host quirk only when a probe shows the host needs
// it. A host that refuses a negative oom_score_adj gets a runc wrapper that
// clamps the OCI spec's process.oomScoreAdj to 0 (see cmd/runc-oom-clamp).
//
// # Signals without a GPU
//
// The fake device nodes are mknod'ed 226:N character devices. Opening one
// inside a container gives EPERM when the device cgroup denies it, ENXIO
// when the cgroup allows it (the kernel has no DRM driver behind the
// number), and EACCES when file permissions deny it. See Probe.
package harness
