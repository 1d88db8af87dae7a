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

// Main starts a daemon and returns its exit code. newFlags is the
// command's NewFlagSet: it binds the command's options O and the log
// flags to a flag set. Main applies the GC default (gctune), parses the
// command line into that set and then the DRI_CDI_* environment for flags
// the command line left unset (flagenv), refuses positional arguments (no
// daemon takes any), builds the logger from the log flags, and calls run
// with the parsed options and a context that ends on SIGTERM or an
// interrupt. Usage errors are written to stderr, prefixed with the flag
// set's name; a failing run is logged.
func Main[O any](newFlags func(*O, *logging.Flags) *flag.FlagSet, run func(ctx context.Context, o O, log *logrus.Logger) error) int {
	gctune.Apply()
	return start(os.Args[1:], os.Stderr, os.LookupEnv, newFlags, run)
}

func start[O any](args []string, stderr io.Writer, lookup func(string) (string, bool),
	newFlags func(*O, *logging.Flags) *flag.FlagSet, run func(ctx context.Context, o O, log *logrus.Logger) error) int {
	var o O
	var logFlags logging.Flags
	fs := newFlags(&o, &logFlags)
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
	if err := run(ctx, o, log); err != nil {
		log.WithError(err).Error(name + " failed")
		return ExitFailed
	}
	return ExitOK
}
