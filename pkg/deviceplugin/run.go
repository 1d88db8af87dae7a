package deviceplugin

import (
	"context"
	"flag"

	"github.com/dri-cdi/dri-cdi/pkg/agent"
	"github.com/dri-cdi/dri-cdi/pkg/flagenv"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
	"github.com/sirupsen/logrus"
)

// RunOptions configure dri-cdi-agent: the discovery and spec loop's
// options and the device plugin's own.
type RunOptions struct {
	// Agent holds the loop's options (roots, CDI dir, config, resync,
	// metrics address, logger, version).
	Agent agent.Options
	// Backend holds the device plugin's options; its Log defaults to
	// Agent.Log.
	Backend BackendOptions
}

// NewFlagSet returns the command line of dri-cdi-agent: its flags write
// into o and log, with the defaults docs/agent.md lists, and each says
// its environment variable (flagenv.Prefix). Parsing errors are returned
// (flag.ContinueOnError).
func NewFlagSet(o *RunOptions, log *logging.Flags) *flag.FlagSet {
	fs := flag.NewFlagSet("dri-cdi-agent", flag.ContinueOnError)
	agent.RegisterCardFlags(fs, &o.Agent, ":9470")
	fs.StringVar(&o.Backend.KubeletDir, "kubelet-dir", DefaultKubeletDir, "kubelet device-plugins directory (kubelet.sock)")
	fs.StringVar(&o.Backend.Delivery, "delivery", string(DeliveryCDICRI), "how Allocate hands devices over: cdi-cri, nri or device-specs")
	log.Register(fs)
	flagenv.Usage(fs, flagenv.Prefix)
	return fs
}

// Run is dri-cdi-agent: the discovery, CDI spec and hotplug loop
// publishing to one device plugin per pool. An invalid option or config
// is returned before any file is written or socket created.
func Run(ctx context.Context, o RunOptions) error {
	loop, err := agent.New(o.Agent)
	if err != nil {
		return err
	}
	if o.Backend.Log == nil {
		o.Backend.Log = o.Agent.Log
	}
	b, err := NewBackend(loop.Config(), loop.Metrics(), o.Backend)
	if err != nil {
		return err
	}
	o.Backend.Log.WithFields(logrus.Fields{"kubeletDir": o.Backend.KubeletDir, "delivery": o.Backend.Delivery}).Info("device plugin backend")
	return loop.Run(ctx, b)
}
