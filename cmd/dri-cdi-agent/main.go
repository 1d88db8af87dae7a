// Command dri-cdi-agent advertises the node's DRM cards to the kubelet as
// device plugin resources and keeps their CDI specs up to date.
package main

import (
	"context"
	"os"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/pkg/daemon"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin"
	"github.com/dri-cdi/dri-cdi/pkg/version"
)

func main() {
	os.Exit(daemon.Main(deviceplugin.NewFlagSet, func(ctx context.Context, o deviceplugin.RunOptions, log *logrus.Logger) error {
		o.Agent.Log, o.Agent.Version = logrus.NewEntry(log).WithField("version", version.Version), version.Version
		return deviceplugin.Run(ctx, o)
	}))
}
