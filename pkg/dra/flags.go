package dra

import (
	"flag"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/agent"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/flagenv"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
)

// NewFlagSet returns the command line of dri-cdi-dra: its flags write
// into o and log, with the defaults docs/dra-plugin.md lists, and each
// says its environment variable (flagenv.Prefix). Parsing errors are
// returned (flag.ContinueOnError).
func NewFlagSet(o *RunOptions, log *logging.Flags) *flag.FlagSet {
	fs := flag.NewFlagSet("dri-cdi-dra", flag.ContinueOnError)
	fs.StringVar(&o.NodeName, "node-name", "", "this node's name, the ResourceSlice pool (downward API spec.nodeName); required")
	fs.StringVar(&o.PodUID, "pod-uid", "", "this pod's UID (downward API metadata.uid); set, it enables rolling updates (kubelet >= 1.33)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (empty: in-cluster service account)")
	fs.StringVar(&o.PluginDataDir, "plugin-data-dir", DefaultPluginDataDir, "directory for dra.sock and the checkpoint; same path on the host")
	fs.StringVar(&o.RegistrarDir, "registrar-dir", DefaultRegistrarDir, "kubelet plugin registration directory; same path on the host")
	fs.StringVar(&o.Agent.Roots.Sysfs, "sysfs-root", drm.DefaultRoots.Sysfs, "sysfs mount to discover cards from")
	fs.StringVar(&o.Agent.Roots.Dev, "dev-root", drm.DefaultRoots.Dev, "dev tree holding dri/ (device nodes)")
	fs.StringVar(&o.Agent.CDIDir, "cdi-dir", cdi.DefaultDir, "directory for the CDI spec files")
	fs.StringVar(&o.Agent.ConfigPath, "config", "", "YAML config file (empty: one pool per driver)")
	fs.StringVar(&o.Agent.MetricsAddr, "metrics-addr", ":9472", "address for /metrics, /healthz and /readyz (empty disables)")
	fs.DurationVar(&o.Agent.ResyncInterval, "resync-interval", agent.DefaultResyncInterval, "period of the full rescan behind inotify and uevents")
	log.Register(fs)
	flagenv.Usage(fs, flagenv.Prefix)
	return fs
}
