// Command dri-cdi-nri is the dri-cdi NRI plugin: at container creation it
// gives a container the DRM device nodes and cgroup rules of the cards the
// kubelet allocated to it. See package nri and docs/nri.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/flagenv"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
)

func main() {
	var o nri.Options
	var logFlags logging.Flags
	fs := nri.NewFlagSet(&o, &logFlags)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if err := flagenv.Apply(fs, flagenv.Prefix, os.LookupEnv); err != nil {
		fmt.Fprintln(os.Stderr, "dri-cdi-nri:", err)
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "dri-cdi-nri: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	log, err := logFlags.New(os.Stderr)
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
