// Command dri-cdi-dra publishes the node's DRM cards as a DRA
// ResourceSlice (driver dri-cdi.dev) and prepares claims with the same
// CDI specs the device plugin uses.
package main

import (
	"context"
	"os"

	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"

	"github.com/dri-cdi/dri-cdi/pkg/daemon"
	"github.com/dri-cdi/dri-cdi/pkg/dra"
	"github.com/dri-cdi/dri-cdi/pkg/logging/klogbridge"
	"github.com/dri-cdi/dri-cdi/pkg/version"
)

func main() {
	os.Exit(daemon.Main(dra.NewFlagSet, func(ctx context.Context, o dra.RunOptions, log *logrus.Logger) error {
		o.Agent.Log, o.Agent.Version = logrus.NewEntry(log).WithField("version", version.Version), version.Version
		// client-go logs with klog.
		klogs, err := klogbridge.Route(o.Agent.Log.WithField("component", "client-go"))
		if err != nil {
			return err
		}
		return dra.Run(klog.NewContext(ctx, klogs), o)
	}))
}
