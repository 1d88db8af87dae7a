// Command dri-cdi-nri is the dri-cdi NRI plugin: at container creation it
// gives a container the DRM device nodes and cgroup rules of the cards the
// kubelet allocated to it. See package nri and docs/nri.md.
package main

import (
	"context"
	"os"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/daemon"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
)

func main() {
	var o nri.Options
	var logFlags logging.Flags
	fs := nri.NewFlagSet(&o, &logFlags)
	os.Exit(daemon.Main(os.Args[1:], fs, &logFlags, os.Stderr, func(ctx context.Context, log *logrus.Logger) error {
		return run(ctx, o, log.WithField("component", "dri-cdi-nri"))
	}))
}
