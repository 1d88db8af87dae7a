// Command dri-cdi-agent advertises the node's DRM cards to the kubelet as
// device plugin resources and keeps their CDI specs up to date.
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
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/flagenv"
	"github.com/dri-cdi/dri-cdi/pkg/gctune"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
	"github.com/dri-cdi/dri-cdi/pkg/version"
)

func main() {
	gctune.Apply()
	var o agent.Options
	var logFormat, logLevel string
	fs := flag.NewFlagSet("dri-cdi-agent", flag.ContinueOnError)
	fs.StringVar(&o.Roots.Sysfs, "sysfs-root", drm.DefaultRoots.Sysfs, "sysfs mount to discover cards from")
	fs.StringVar(&o.Roots.Dev, "dev-root", drm.DefaultRoots.Dev, "dev tree holding dri/ (device nodes)")
	fs.StringVar(&o.CDIDir, "cdi-dir", cdi.DefaultDir, "directory for the CDI spec files")
	fs.StringVar(&o.KubeletDir, "kubelet-dir", deviceplugin.DefaultKubeletDir, "kubelet device-plugins directory (kubelet.sock)")
	fs.StringVar(&o.ConfigPath, "config", "", "YAML config file (empty: one pool per driver)")
	fs.StringVar(&o.Delivery, "delivery", string(deviceplugin.DeliveryCDICRI), "how Allocate hands devices over: cdi-cri, nri or device-specs")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":9470", "address for /metrics, /healthz and /readyz (empty disables)")
	fs.DurationVar(&o.ResyncInterval, "resync-interval", agent.DefaultResyncInterval, "period of the full rescan behind inotify and uevents")
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
		fmt.Fprintln(os.Stderr, "dri-cdi-agent:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	o.Log, o.Version = logrus.NewEntry(log).WithField("version", version.Version), version.Version
	err = agent.Run(ctx, o)
	stop()
	if err != nil {
		log.WithError(err).Error("dri-cdi-agent failed")
		os.Exit(1)
	}
}
