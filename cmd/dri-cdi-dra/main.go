// Command dri-cdi-dra publishes the node's DRM cards as a DRA
// ResourceSlice (driver dri-cdi.dev) and prepares claims with the same
// CDI specs the device plugin uses.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/agent"
	"github.com/dri-cdi/dri-cdi/pkg/dra"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/flagenv"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
	"github.com/dri-cdi/dri-cdi/pkg/version"
)

func main() {
	var o dra.RunOptions
	var logFormat, logLevel string
	fs := flag.NewFlagSet("dri-cdi-dra", flag.ContinueOnError)
	fs.StringVar(&o.NodeName, "node-name", "", "this node's name, the ResourceSlice pool (downward API spec.nodeName); required")
	fs.StringVar(&o.PodUID, "pod-uid", "", "this pod's UID (downward API metadata.uid); set, it enables rolling updates (kubelet >= 1.33)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (empty: in-cluster service account)")
	fs.StringVar(&o.PluginDataDir, "plugin-data-dir", dra.DefaultPluginDataDir, "directory for dra.sock and the checkpoint; same path on the host")
	fs.StringVar(&o.RegistrarDir, "registrar-dir", dra.DefaultRegistrarDir, "kubelet plugin registration directory; same path on the host")
	fs.StringVar(&o.Agent.Roots.Sysfs, "sysfs-root", drm.DefaultRoots.Sysfs, "sysfs mount to discover cards from")
	fs.StringVar(&o.Agent.Roots.Dev, "dev-root", drm.DefaultRoots.Dev, "dev tree holding dri/ (device nodes)")
	fs.StringVar(&o.Agent.CDIDir, "cdi-dir", cdi.DefaultDir, "directory for the CDI spec files")
	fs.StringVar(&o.Agent.ConfigPath, "config", "", "YAML config file (empty: one pool per driver)")
	fs.StringVar(&o.Agent.MetricsAddr, "metrics-addr", ":9472", "address for /metrics, /healthz and /readyz (empty disables)")
	fs.DurationVar(&o.Agent.ResyncInterval, "resync-interval", agent.DefaultResyncInterval, "period of the full rescan behind inotify and uevents")
	fs.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&logLevel, "log-level", "info", "log level: error, warn, info, debug, trace")
	flagenv.Usage(fs, flagenv.Prefix)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	var log *logrus.Logger
	err := flagenv.Apply(fs, flagenv.Prefix, os.LookupEnv)
	if err == nil {
		log, err = logging.New(os.Stderr, logFormat, logLevel)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dri-cdi-dra:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	o.Agent.Log, o.Agent.Version = logrus.NewEntry(log).WithField("version", version.Version), version.Version
	err = dra.Run(ctx, o)
	stop()
	if err != nil {
		log.WithError(err).Error("dri-cdi-dra failed")
		os.Exit(1)
	}
}
