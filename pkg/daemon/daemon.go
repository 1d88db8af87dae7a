// Package daemon is the one start sequence of dri-cdi's long-running
// binaries (dri-cdi-agent, dri-cdi-nri, dri-cdi-dra), so that their
// flags, environment, logging, signals and exit codes behave alike.
package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/pkg/flagenv"
	"github.com/dri-cdi/dri-cdi/pkg/gctune"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
)

// Exit codes of Main.
const (
	// ExitOK: run returned nil, or -h asked for the help.
	ExitOK = 0
	// ExitFailed: run returned an error.
	ExitFailed = 1
	// ExitUsage: bad flags, environment or arguments; run never started.
	ExitUsage = 2
)

// Main starts a daemon and returns its exit code. It applies the GC
// default (gctune), parses args into fs and then the DRI_CDI_*
// environment for flags the command line left unset (flagenv), refuses
// positional arguments (no daemon takes any), builds the logger from
// logFlags, and calls run with a context that ends on SIGTERM or an
// interrupt. Usage errors are written to stderr, prefixed with fs's name;
// a failing run is logged.
func Main(args []string, fs *flag.FlagSet, logFlags *logging.Flags, stderr io.Writer, run func(ctx context.Context, log *logrus.Logger) error) int {
	gctune.Apply()
	return start(args, fs, logFlags, stderr, os.LookupEnv, run)
}

func start(args []string, fs *flag.FlagSet, logFlags *logging.Flags, stderr io.Writer, lookup func(string) (string, bool), run func(ctx context.Context, log *logrus.Logger) error) int {
	name := fs.Name()
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if err := flagenv.Apply(fs, flagenv.Prefix, lookup); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected arguments %q\n", name, fs.Args())
		return ExitUsage
	}
	log, err := logFlags.New(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, log); err != nil {
		log.WithError(err).Error(name + " failed")
		return ExitFailed
	}
	return ExitOK
}
