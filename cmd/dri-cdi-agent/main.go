// Command dri-cdi-agent advertises the node's DRM cards to the kubelet as
// device plugin resources and keeps their CDI specs up to date.
package main

import (
	"context"
	"os"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/pkg/agent"
	"github.com/dri-cdi/dri-cdi/pkg/daemon"
	"github.com/dri-cdi/dri-cdi/pkg/version"
)

func main() {
	os.Exit(daemon.Main(agent.NewFlagSet, func(ctx context.Context, o agent.Options, log *logrus.Logger) error {
		o.Log, o.Version = logrus.NewEntry(log).WithField("version", version.Version), version.Version
		return agent.Run(ctx, o)
	}))
}
