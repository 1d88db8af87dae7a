package nri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/kubeletcheckpoint"
	"github.com/dri-cdi/dri-cdi/pkg/metrics"
	"github.com/dri-cdi/dri-cdi/pkg/nodecheck"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
	"github.com/dri-cdi/dri-cdi/pkg/version"
)

// Run is dri-cdi-nri: it checks o, builds the plugin from it (the
// PodResources client, the kubelet checkpoint reader, the CDI spec index
// and its watch, the metrics and health server), connects the plugin to
// the runtime (Plugin.Run) and serves until ctx ends. It returns an error
// for invalid options, and when the spec watch or a pre-registered
// connection fails.
func Run(ctx context.Context, o Options) error {
	log := o.Log
	if log == nil {
		return errors.New("no logger")
	}
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

	met := NewMetrics()
	if o.CDIReloadInterval < 0 {
		return fmt.Errorf("invalid --cdi-reload-interval %v: must be positive", o.CDIReloadInterval)
	}
	store := NewSpecIndex(o.CDIDir, conf.Kind(), cdi.LoadDevices, met, log, WithReloadInterval(o.CDIReloadInterval))
	if err := store.Reload(); err != nil {
		log.WithError(err).Warn("CDI specs not (fully) loaded at start")
	}
	pcfg := Config{
		Kind: conf.Kind(), Resources: conf, Authorizer: client, Devices: store, Metrics: met, Log: log,
		HostStat: o.hostStat, Owner: sysfsOwner(o.SysfsRoot, log),
		MemoryPolicy: conf, CgroupRoot: o.CgroupRoot,
	}
	if o.DRACheckpoint != "" {
		pcfg.Memory = NewDRACheckpoint(o.DRACheckpoint)
	}
	// /readyz says so while the kernel's record of device numbers is out
	// of the identity check.
	warnings := func() []string { return nil }
	if pcfg.Owner == nil {
		w := []string{noDevCharWarning(o.SysfsRoot)}
		warnings = func() []string { return w }
	}
	if o.KubeletCheckpoint != "" {
		// Bounded like a PodResources query: both run while the runtime waits.
		pcfg.Checkpoint = kubeletcheckpoint.NewReader(o.KubeletCheckpoint, o.PodResourcesTimeout)
	}
	plugin, err := New(pcfg)
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
		var served sync.WaitGroup
		defer served.Wait()
		h := metrics.Handler(met.Registry(), metrics.Health{Ready: plugin.Ready(store), Warnings: warnings})
		h = nodecheck.Mount(h, nodecheck.NRI(o.CDIDir, conf.Kind(), o.PodResourcesSocket, o.NRISocket))
		metrics.Start(ctx, &served, l, h, log.WithField("component", "metrics"))
	}
	watched := make(chan error, 1)
	go func() { watched <- store.Watch(ctx) }()

	log.WithFields(logrus.Fields{"version": version.Version, "cdiKind": conf.Kind(), "cdiDir": o.CDIDir,
		"podResources": o.PodResourcesSocket, "kubeletCheckpoint": o.KubeletCheckpoint,
		"draCheckpoint": o.DRACheckpoint, "cgroupRoot": o.CgroupRoot}).Info("starting")
	err = plugin.Run(ctx, ConnectConfig{Socket: o.NRISocket, Name: o.PluginName, Index: o.PluginIndex})
	cancel()
	return errors.Join(err, <-watched)
}

// sysfsOwner is the CharOwner over sysfs, or nil, with a warning, when
// sysfs has no dev/char directory (not a sysfs, or an empty --sysfs-root):
// the identity check then rests on the host paths and by-path links
// alone.
func sysfsOwner(sysfs string, log *logrus.Entry) CharOwner {
	dir := filepath.Join(sysfs, "dev", "char")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		log.Warn(noDevCharWarning(sysfs))
		return nil
	}
	return SysfsOwner(sysfs)
}

// noDevCharWarning is the log line and /readyz warning of a sysfs root
// without dev/char.
func noDevCharWarning(sysfs string) string {
	return fmt.Sprintf("--sysfs-root %q has no dev/char: device nodes are checked against their host paths and "+
		"by-path links only, not against the kernel's record of which card holds their numbers", sysfs)
}
