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

	"github.com/dri-cdi/dri-cdi/pkg/dra"
	"github.com/dri-cdi/dri-cdi/pkg/flagenv"
	"github.com/dri-cdi/dri-cdi/pkg/gctune"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
	"github.com/dri-cdi/dri-cdi/pkg/version"
)

func main() {
	gctune.Apply()
	var o dra.RunOptions
	var logFlags logging.Flags
	fs := dra.NewFlagSet(&o, &logFlags)
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
