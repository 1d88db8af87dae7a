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
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
	"github.com/dri-cdi/dri-cdi/pkg/version"
)

type options struct {
	nriSocket, pluginName, pluginIndex string
	podResourcesSocket                 string
	kubeletCheckpoint                  string
	podResourcesTimeout                time.Duration
	cdiDir, config, metricsAddr        string
	cdiReloadInterval                  time.Duration
	// hostStat replaces the plugin's stat of host nodes (tests).
	hostStat nri.HostStat
}

// run wires the plugin together and serves until ctx ends.
func run(ctx context.Context, o options, log *logrus.Entry) error {
	conf, err := config.Load(o.config)
	if err != nil {
		return err
	}
	if o.podResourcesTimeout <= 0 {
		return fmt.Errorf("invalid --pod-resources-timeout %v: must be positive", o.podResourcesTimeout)
	}
	if o.podResourcesTimeout >= 1500*time.Millisecond {
		log.Warnf("--pod-resources-timeout %v leaves little of the runtime's NRI request timeout (2s by default); "+
			"a plugin that answers late is dropped and its devices silently not injected", o.podResourcesTimeout)
	}
	client, err := podresources.New(o.podResourcesSocket, podresources.WithTimeout(o.podResourcesTimeout))
	if err != nil {
		return err
	}
	defer func() { _ = client.Close() }()

	metrics := nri.NewMetrics()
	if o.cdiReloadInterval < 0 {
		return fmt.Errorf("invalid --cdi-reload-interval %v: must be positive", o.cdiReloadInterval)
	}
	store := nri.NewSpecIndex(o.cdiDir, conf.Kind(), cdi.LoadDevices, metrics, log, nri.WithReloadInterval(o.cdiReloadInterval))
	if err := store.Reload(); err != nil {
		log.WithError(err).Warn("CDI specs not (fully) loaded at start")
	}
	pcfg := nri.Config{
		Kind: conf.Kind(), Resources: conf, Authorizer: client, Devices: store, Metrics: metrics, Log: log,
		HostStat: o.hostStat,
	}
	if o.kubeletCheckpoint != "" {
		// Bounded like a PodResources query: both run while the runtime waits.
		pcfg.Checkpoint = kubeletcheckpoint.NewReader(o.kubeletCheckpoint, o.podResourcesTimeout)
	}
	plugin, err := nri.New(pcfg)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.metricsAddr != "" {
		_, done, err := nri.ServeMetrics(ctx, o.metricsAddr, metrics, plugin.Healthz, plugin.Readyz(store), log)
		if err != nil {
			return err
		}
		defer func() { <-done }()
	}
	watched := make(chan error, 1)
	go func() { watched <- store.Watch(ctx) }()

	log.WithFields(logrus.Fields{"version": version.Version, "cdiKind": conf.Kind(), "cdiDir": o.cdiDir,
		"podResources": o.podResourcesSocket, "kubeletCheckpoint": o.kubeletCheckpoint}).Info("starting")
	err = plugin.Run(ctx, nri.ConnectConfig{Socket: o.nriSocket, Name: o.pluginName, Index: o.pluginIndex})
	cancel()
	return errors.Join(err, <-watched)
}
