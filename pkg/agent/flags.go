package agent

import (
	"flag"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/usage"
)

// RegisterCardFlags registers into fs the flags of o that dri-cdi-agent
// and dri-cdi-dra share, since both discover the cards and write their
// CDI specs the same way: the roots, the CDI directory, the config file,
// the metrics address (metricsAddr is the command's default; each binary
// has its own port) and the rescan period.
func RegisterCardFlags(fs *flag.FlagSet, o *Options, metricsAddr string) {
	fs.StringVar(&o.Roots.Sysfs, "sysfs-root", drm.DefaultRoots.Sysfs, "sysfs mount to discover cards from")
	fs.StringVar(&o.Roots.Dev, "dev-root", drm.DefaultRoots.Dev, "dev tree holding dri/ (device nodes)")
	fs.StringVar(&o.CDIDir, "cdi-dir", cdi.DefaultDir, "directory for the CDI spec files")
	fs.StringVar(&o.ConfigPath, "config", "", "YAML config file (empty: one pool per driver)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", metricsAddr, "address for /metrics, /healthz and /readyz (empty disables)")
	fs.DurationVar(&o.ResyncInterval, "resync-interval", DefaultResyncInterval, "period of the full rescan behind inotify and uevents")
	usage.RegisterFlags(fs, &o.Usage)
}
