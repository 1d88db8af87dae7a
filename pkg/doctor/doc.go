// Package doctor checks a node the way an operator would before and after
// deploying dri-cdi, and says for each problem how to fix it.
//
// # Checks
//
// Every check reads, never writes:
//
//   - the containerd configuration (version 2 and version 3 layouts, with
//     its imports): is CDI on, is the CDI spec directory in cdi_spec_dirs,
//     is NRI on and reachable on the socket the plugin dials; while k3s's
//     containerd answers on its socket it reads k3s's generated config
//     rather than /etc/containerd/config.toml, and says which file it read
//     and why; next to a k3s config it names the drop-in directory the
//     config imports (config-v3.toml.d/) or else the template k3s renders
//     that config version from (config-v3.toml.tmpl for version 3,
//     config.toml.tmpl for version 2) and whether this k3s embeds
//     containerd 2.x;
//   - the kubelet: its device plugin directory and kubelet.sock, and the
//     PodResources socket;
//   - the cgroup version and what enforces a container's device access:
//     the v1 devices controller, or on v2 an eBPF program attached to the
//     container's cgroup; on v2 also the dmem controller (device memory
//     limits, Linux 6.14+) and its regions. Inside a private cgroup
//     namespace, where /sys/fs/cgroup shows a sub-tree, the root-only
//     dmem.capacity cannot be seen, and doctor says so;
//   - the DRM cards and their device nodes (pkg/drm discovery);
//   - the CDI specs of our kind: valid for the CDI library, and matching
//     the cards and device nodes of this node;
//   - which delivery mode this runtime supports, against the one deployed.
//
// Each check ends OK, WARN or FAIL; a FAIL makes the report failed. Every
// path is an Option, so tests run against fixture trees.
//
// CheckScope runs a chosen subset, the checks a daemon can make from its
// own container; it never reads the containerd config. pkg/nodecheck
// serves such reports on the daemons' metrics ports.
//
// # Host root
//
// With Options.Root set (--host-root /host in a `kubectl debug node` pod),
// every host path is resolved inside that directory as the kernel would
// resolve it if the directory were "/": absolute symlinks such as
// /var/run -> /run start again from the root and ".." stops at it, so
// nothing outside the host's filesystem is ever read.
//
// # Example
//
//	rep, err := doctor.Check(ctx, doctor.DefaultOptions())
//	if err != nil { return err }
//	_ = rep.Write(os.Stdout, "text")
//	if rep.Failed { os.Exit(1) }
package doctor
