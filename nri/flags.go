package nri

import (
	"flag"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/dmem"
	"github.com/dri-cdi/dri-cdi/pkg/dracheckpoint"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/flagenv"
	"github.com/dri-cdi/dri-cdi/pkg/kubeletcheckpoint"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
)

// Options are what the command line of dri-cdi-nri sets (NewFlagSet), and
// what Run runs it with.
type Options struct {
	// NRISocket, PluginName and PluginIndex say how to reach and register
	// with the runtime (ConnectConfig).
	NRISocket, PluginName, PluginIndex string
	// PodResourcesSocket and PodResourcesTimeout reach the kubelet's
	// PodResources API; KubeletCheckpoint is the device manager's
	// checkpoint (empty: not read).
	PodResourcesSocket  string
	PodResourcesTimeout time.Duration
	KubeletCheckpoint   string
	// CDIDir holds the agent's specs, reloaded every CDIReloadInterval
	// besides the watch.
	CDIDir            string
	CDIReloadInterval time.Duration
	// Config is the dri-cdi config file; empty: the defaults.
	Config string
	// DRACheckpoint is dri-cdi-dra's checkpoint, read for the device
	// memory of shares (empty: no memory limits are set); CgroupRoot is
	// the host's cgroup v2 mount, read for dmem.
	DRACheckpoint, CgroupRoot string
	// SysfsRoot is the host's sysfs, where <sysfs>/dev/char says which
	// card holds a device number now.
	SysfsRoot string
	// MetricsAddr serves /metrics, /healthz and /readyz; empty disables.
	MetricsAddr string
	// Log receives the plugin's logs; main sets it, no flag does.
	Log *logrus.Entry

	// hostStat replaces the plugin's stat of host nodes (tests, through
	// export_test.go); nil means StatHost.
	hostStat HostStat
}

// NewFlagSet returns the command line of dri-cdi-nri: its flags write
// into o and log, with the defaults docs/nri.md lists, and each says its
// environment variable (flagenv.Prefix). Parsing errors are returned
// (flag.ContinueOnError).
func NewFlagSet(o *Options, log *logging.Flags) *flag.FlagSet {
	fs := flag.NewFlagSet("dri-cdi-nri", flag.ContinueOnError)
	fs.StringVar(&o.NRISocket, "nri-socket", DefaultSocket, "the runtime's NRI socket")
	fs.StringVar(&o.PluginName, "plugin-name", DefaultName, "NRI plugin name")
	fs.StringVar(&o.PluginIndex, "plugin-index", DefaultIndex, "NRI plugin index (two digits): order among plugins")
	fs.StringVar(&o.PodResourcesSocket, "pod-resources-socket", podresources.DefaultSocket, "the kubelet's PodResources socket")
	fs.DurationVar(&o.PodResourcesTimeout, "pod-resources-timeout", podresources.DefaultTimeout,
		"deadline of one PodResources query; keep it well below the runtime's NRI request timeout (2s)")
	fs.StringVar(&o.KubeletCheckpoint, "kubelet-checkpoint", kubeletcheckpoint.DefaultPath,
		"the kubelet device manager's checkpoint, read to authorize regular init containers (PodResources does not report them); empty disables")
	fs.StringVar(&o.CDIDir, "cdi-dir", cdi.DefaultDir, "directory of the CDI specs the agent writes")
	fs.DurationVar(&o.CDIReloadInterval, "cdi-reload-interval", DefaultReloadInterval,
		"period of the CDI spec reload that backs the directory watch")
	fs.StringVar(&o.Config, "config", "", "dri-cdi config file (YAML); empty: defaults")
	fs.StringVar(&o.DRACheckpoint, "dra-checkpoint", dracheckpoint.DefaultPath,
		"dri-cdi-dra's checkpoint, read for the device memory allocated to shares of cards (dmem.max); empty disables memory limits")
	fs.StringVar(&o.CgroupRoot, "cgroup-root", dmem.DefaultCgroupRoot,
		"the host's cgroup v2 mount: dmem.capacity and the containers' parent cgroups say whether a memory limit can be enforced")
	fs.StringVar(&o.SysfsRoot, "sysfs-root", drm.DefaultRoots.Sysfs, "the host's sysfs: dev/char tells which card holds a device number now")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9471", "address of /metrics, /healthz and /readyz; empty disables")
	log.Register(fs)
	flagenv.Usage(fs, flagenv.Prefix)
	return fs
}
