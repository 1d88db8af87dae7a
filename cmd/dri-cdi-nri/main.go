// Command dri-cdi-nri is the dri-cdi NRI plugin: at container creation it
// gives a container the DRM device nodes and cgroup rules of the cards the
// kubelet allocated to it. See package nri and docs/nri.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/flagenv"
	"github.com/dri-cdi/dri-cdi/pkg/gctune"
	"github.com/dri-cdi/dri-cdi/pkg/kubeletcheckpoint"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
)

func main() {
	gctune.Apply()
	var o options
	fs := flag.NewFlagSet("dri-cdi-nri", flag.ExitOnError)
	fs.StringVar(&o.nriSocket, "nri-socket", nri.DefaultSocket, "the runtime's NRI socket")
	fs.StringVar(&o.pluginName, "plugin-name", nri.DefaultName, "NRI plugin name")
	fs.StringVar(&o.pluginIndex, "plugin-index", nri.DefaultIndex, "NRI plugin index (two digits): order among plugins")
	fs.StringVar(&o.podResourcesSocket, "pod-resources-socket", podresources.DefaultSocket, "the kubelet's PodResources socket")
	fs.DurationVar(&o.podResourcesTimeout, "pod-resources-timeout", podresources.DefaultTimeout,
		"deadline of one PodResources query; keep it well below the runtime's NRI request timeout (2s)")
	fs.StringVar(&o.kubeletCheckpoint, "kubelet-checkpoint", kubeletcheckpoint.DefaultPath,
		"the kubelet device manager's checkpoint, read to authorize regular init containers (PodResources does not report them); empty disables")
	fs.StringVar(&o.cdiDir, "cdi-dir", cdi.DefaultDir, "directory of the CDI specs the agent writes")
	fs.DurationVar(&o.cdiReloadInterval, "cdi-reload-interval", nri.DefaultReloadInterval,
		"period of the CDI spec reload that backs the directory watch")
	fs.StringVar(&o.config, "config", "", "dri-cdi config file (YAML); empty: defaults")
	fs.StringVar(&o.metricsAddr, "metrics-addr", ":9471", "address of /metrics, /healthz and /readyz; empty disables")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: error, warn, info, debug, trace")
	flagenv.Usage(fs, flagenv.Prefix)
	_ = fs.Parse(os.Args[1:])
	if err := flagenv.Apply(fs, flagenv.Prefix, os.LookupEnv); err != nil {
		fmt.Fprintln(os.Stderr, "dri-cdi-nri:", err)
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "dri-cdi-nri: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	log, err := logging.New(os.Stderr, *logFormat, *logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dri-cdi-nri:", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, o, log.WithField("component", "dri-cdi-nri"))
	stop()
	if err != nil {
		log.WithError(err).Error("exiting")
		os.Exit(1)
	}
}
