package doctor

import (
	"errors"
	"flag"
)

// ErrChecksFailed is what a caller of Check returns when the report
// failed (Report.Failed), so that the CLI exits non-zero.
var ErrChecksFailed = errors.New("doctor: at least one check failed")

// RegisterFlags adds the doctor's path and mode flags to fs, with opts'
// current values as defaults, writing into opts.
func RegisterFlags(fs *flag.FlagSet, opts *Options) {
	fs.StringVar(&opts.Root, "host-root", opts.Root, "where the host's filesystem is mounted (e.g. /host in a debug pod); every other path is looked up below it")
	fs.StringVar(&opts.ContainerdConfig, "containerd-config", opts.ContainerdConfig, "containerd config file (default: the first that exists of /etc/containerd/config.toml and the k3s and RKE2 ones)")
	fs.StringVar(&opts.ContainerdVersion, "containerd-version", opts.ContainerdVersion, "containerd version, as `containerd --version`, `k3s ctr version` or the node's CONTAINER-RUNTIME in `kubectl get nodes -o wide` print it (some settings differ between versions)")
	fs.StringVar(&opts.CDIDir, "cdi-dir", opts.CDIDir, "directory of the agent's CDI specs")
	fs.StringVar(&opts.CDIKind, "cdi-kind", opts.CDIKind, "CDI kind of the agent's devices")
	fs.StringVar(&opts.KubeletDir, "kubelet-dir", opts.KubeletDir, "kubelet device plugin directory")
	fs.StringVar(&opts.PluginsRegistryDir, "plugins-registry-dir", opts.PluginsRegistryDir, "kubelet plugin registration directory (where a DRA driver registers)")
	fs.StringVar(&opts.PodResourcesSocket, "pod-resources-socket", opts.PodResourcesSocket, "kubelet PodResources socket")
	fs.StringVar(&opts.NRISocket, "nri-socket", opts.NRISocket, "containerd NRI socket the plugin dials")
	fs.StringVar(&opts.SysfsRoot, "sysfs-root", opts.SysfsRoot, "sysfs mount point")
	fs.StringVar(&opts.DevRoot, "dev-root", opts.DevRoot, "devfs mount point")
	fs.StringVar(&opts.Delivery, "delivery", opts.Delivery, "the agent's delivery mode: cdi-cri, nri or device-specs")
}
