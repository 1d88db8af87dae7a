package agent

import (
	"flag"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/flagenv"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
)

// NewFlagSet returns the command line of dri-cdi-agent: its flags write
// into o and log, with the defaults docs/agent.md lists, and each says
// its environment variable (flagenv.Prefix). Parsing errors are returned
// (flag.ContinueOnError).
func NewFlagSet(o *Options, log *logging.Flags) *flag.FlagSet {
	fs := flag.NewFlagSet("dri-cdi-agent", flag.ContinueOnError)
	fs.StringVar(&o.Roots.Sysfs, "sysfs-root", drm.DefaultRoots.Sysfs, "sysfs mount to discover cards from")
	fs.StringVar(&o.Roots.Dev, "dev-root", drm.DefaultRoots.Dev, "dev tree holding dri/ (device nodes)")
	fs.StringVar(&o.CDIDir, "cdi-dir", cdi.DefaultDir, "directory for the CDI spec files")
	fs.StringVar(&o.KubeletDir, "kubelet-dir", deviceplugin.DefaultKubeletDir, "kubelet device-plugins directory (kubelet.sock)")
	fs.StringVar(&o.ConfigPath, "config", "", "YAML config file (empty: one pool per driver)")
	fs.StringVar(&o.Delivery, "delivery", string(deviceplugin.DeliveryCDICRI), "how Allocate hands devices over: cdi-cri, nri or device-specs")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9470", "address for /metrics, /healthz and /readyz (empty disables)")
	fs.DurationVar(&o.ResyncInterval, "resync-interval", DefaultResyncInterval, "period of the full rescan behind inotify and uevents")
	log.Register(fs)
	flagenv.Usage(fs, flagenv.Prefix)
	return fs
}
