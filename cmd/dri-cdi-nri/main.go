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
)

func main() {
	os.Exit(daemon.Main(nri.NewFlagSet, func(ctx context.Context, o nri.Options, log *logrus.Logger) error {
		o.Log = logrus.NewEntry(log).WithField("component", "dri-cdi-nri")
		return nri.Run(ctx, o)
	}))
}
