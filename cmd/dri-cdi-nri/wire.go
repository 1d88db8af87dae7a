package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/kubeletcheckpoint"
	"github.com/dri-cdi/dri-cdi/pkg/metrics"
	"github.com/dri-cdi/dri-cdi/pkg/nodecheck"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
	"github.com/dri-cdi/dri-cdi/pkg/version"
)

// run wires the plugin together and serves until ctx ends.
func run(ctx context.Context, o nri.Options, log *logrus.Entry) error {
	conf, err := config.Load(o.Config)
	if err != nil {
		return err
	}
	if o.PodResourcesTimeout <= 0 {
		return fmt.Errorf("invalid --pod-resources-timeout %v: must be positive", o.PodResourcesTimeout)
	}
	if o.PodResourcesTimeout >= 1500*time.Millisecond {
		log.Warnf("--pod-resources-timeout %v leaves little of the runtime's NRI request timeout (2s by default); "+
			"a plugin that answers late is dropped and its devices silently not injected", o.PodResourcesTimeout)
	}
	client, err := podresources.New(o.PodResourcesSocket, podresources.WithTimeout(o.PodResourcesTimeout))
	if err != nil {
		return err
	}
	defer func() { _ = client.Close() }()

	met := nri.NewMetrics()
	if o.CDIReloadInterval < 0 {
		return fmt.Errorf("invalid --cdi-reload-interval %v: must be positive", o.CDIReloadInterval)
	}
	store := nri.NewSpecIndex(o.CDIDir, conf.Kind(), cdi.LoadDevices, met, log, nri.WithReloadInterval(o.CDIReloadInterval))
	if err := store.Reload(); err != nil {
		log.WithError(err).Warn("CDI specs not (fully) loaded at start")
	}
	pcfg := nri.Config{
		Kind: conf.Kind(), Resources: conf, Authorizer: client, Devices: store, Metrics: met, Log: log,
		HostStat: o.HostStat,
	}
	if o.KubeletCheckpoint != "" {
		// Bounded like a PodResources query: both run while the runtime waits.
		pcfg.Checkpoint = kubeletcheckpoint.NewReader(o.KubeletCheckpoint, o.PodResourcesTimeout)
	}
	plugin, err := nri.New(pcfg)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.MetricsAddr != "" {
		l, err := metrics.Listen(o.MetricsAddr)
		if err != nil {
			return err
		}
		served := make(chan struct{})
		go func() {
			defer close(served)
			h := metrics.Handler(met.Registry(), metrics.Health{Ready: plugin.Ready(store)})
			h = nodecheck.Mount(h, nodecheck.NRI(o.CDIDir, conf.Kind(), o.PodResourcesSocket, o.NRISocket))
			if err := metrics.Serve(ctx, l, h, log.WithField("component", "metrics")); err != nil {
				log.WithError(err).Error("metrics server failed")
			}
		}()
		defer func() { <-served }()
	}
	watched := make(chan error, 1)
	go func() { watched <- store.Watch(ctx) }()

	log.WithFields(logrus.Fields{"version": version.Version, "cdiKind": conf.Kind(), "cdiDir": o.CDIDir,
		"podResources": o.PodResourcesSocket, "kubeletCheckpoint": o.KubeletCheckpoint}).Info("starting")
	err = plugin.Run(ctx, nri.ConnectConfig{Socket: o.NRISocket, Name: o.PluginName, Index: o.PluginIndex})
	cancel()
	return errors.Join(err, <-watched)
}
