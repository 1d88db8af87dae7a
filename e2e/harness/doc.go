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
// # Where things are
//
// One file a responsibility, so that a scenario reads as a spec of what
// it does to the node and the cluster:
//
//   - suite.go, lock.go, config.go, reap.go: the run (machine lock,
//     signals, where the tools and the product binaries are, cleanup of
//     a crashed run).
//   - node.go, proc.go: a node's lifecycle (StartNode, Close) and the host
//     processes it runs (Process, which the bench uses for the binaries it
//     measures), with the log and polling helpers.
//   - containerd.go, kubelet.go: the runtime and the kubelet of a node,
//     their configs and their start, stop and restart; reboot.go.
//   - product.go, pids.go: the dri-cdi agent and NRI plugin as node processes;
//     cdi.go, deviceplugin.go, podresources.go, doctor.go: what the
//     scenarios read back from them (CDI specs, device-plugin
//     registrations and health, PodResources, doctor reports).
//   - cgroupv2.go: the cgroup v2 rig (containerd, runc and the kubelet
//     in a mount and cgroup namespace whose /sys/fs/cgroup is cgroup2),
//     and the bpftool check of a container's device program.
//   - gpus.go: the fake GPUs of a node's DRM tree.
//   - images.go: the pause and busybox images, built without a registry.
//   - pods.go, workloads.go, probe.go: static pods and their containers,
//     and what the probe script inside them prints.
//   - cluster.go, certs.go, kubectl.go, overlay.go, cluster_workloads.go:
//     the control plane, its PKI, the kubectl/helm/kustomize clients, the
//     product's manifests as the cluster scenarios install them, and the
//     Deployments they run.
//   - The *_dra.go files add the same for DRA: the kubelet's plugin
//     directories, the DRA overlay, ResourceSlices and claims, and the
//     DRA workloads.
//
// # Quirks
//
// The harness applies a host quirk only when a probe shows the host needs
// it, through one runc wrapper (cmd/runc-rig). A host that refuses a
// negative oom_score_adj gets the OCI spec's process.oomScoreAdj clamped
// to 0. A node on the cgroup v2 rig (NodeOptions.CgroupV2, cgroupv2.go)
// gets the limits of the controllers its cgroup2 root does not offer left
// out of linux.resources.
//
// # Signals without a GPU
//
// The fake device nodes are mknod'ed 226:N character devices. Opening one
// inside a container gives EPERM when the device cgroup denies it, ENXIO
// when the cgroup allows it (the kernel has no DRM driver behind the
// number), and EACCES when file permissions deny it. See Probe.
package harness
