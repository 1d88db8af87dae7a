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

	"github.com/dri-cdi/dri-cdi/pkg/agent"
	"github.com/dri-cdi/dri-cdi/pkg/flagenv"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
	"github.com/dri-cdi/dri-cdi/pkg/version"
)

func main() {
	var o agent.Options
	var logFlags logging.Flags
	fs := agent.NewFlagSet(&o, &logFlags)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	var log *logrus.Logger
	err := flagenv.Apply(fs, flagenv.Prefix, os.LookupEnv)
	if err == nil {
		log, err = logFlags.New(os.Stderr)
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
