package usage

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// Config is how a daemon runs usage scans: off unless Enabled.
type Config struct {
	// Enabled turns scans and the dri_cdi_usage_* metrics on.
	Enabled bool
	// Interval is the time between scans (DefaultInterval).
	Interval time.Duration
	// ProcRoot is the host's /proc as the daemon sees it.
	ProcRoot string
	// BundleDir is containerd's bundle dir of the k8s.io namespace.
	BundleDir string
	// IdleAfter is the idle-allocation threshold (DefaultIdleAfter).
	IdleAfter time.Duration
}

// RegisterFlags registers the usage flags of a daemon into fs.
func RegisterFlags(fs *flag.FlagSet, c *Config) {
	fs.BoolVar(&c.Enabled, "usage", false, "scan per-container GPU usage from DRM fdinfo and serve dri_cdi_usage_* metrics (needs the host's /proc and CAP_SYS_PTRACE)")
	fs.DurationVar(&c.Interval, "usage-interval", DefaultInterval, "time between usage scans")
	fs.StringVar(&c.ProcRoot, "proc-root", DefaultProcRoot, "the host's /proc, for usage scans")
	fs.StringVar(&c.BundleDir, "usage-bundle-dir", DefaultBundleDir, "containerd's bundle dir of the k8s.io namespace, to name containers")
	fs.DurationVar(&c.IdleAfter, "usage-idle-after", DefaultIdleAfter, "a container holding a card with no engine use for this long is an idle allocation")
}

// Validate checks an enabled Config.
func (c Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	if c.Interval <= 0 {
		return fmt.Errorf("invalid usage interval %v: must be > 0", c.Interval)
	}
	if c.IdleAfter <= 0 {
		return fmt.Errorf("invalid usage idle threshold %v: must be > 0", c.IdleAfter)
	}
	if c.ProcRoot == "" {
		return fmt.Errorf("usage proc root is empty")
	}
	return nil
}

// Run registers the usage metrics in reg and scans every c.Interval
// until ctx ends, naming cards by discovery over roots and, when claims
// is not nil, the DRA claims containers hold them through. It does
// nothing unless c.Enabled.
func Run(ctx context.Context, c Config, roots drm.Roots, claims ClaimSource, reg prometheus.Registerer, log *logrus.Entry) error {
	if !c.Enabled {
		return nil
	}
	if err := c.Validate(); err != nil {
		return err
	}
	m := NewMonitor(Options{
		ProcRoot: c.ProcRoot,
		Cards: func() ([]drm.Card, error) {
			inv, err := drm.Discover(roots)
			if err != nil {
				return nil, err
			}
			return inv.Cards, nil
		},
		Namer:     NewBundleNamer(c.BundleDir),
		IdleAfter: c.IdleAfter,
		Claims:    claims,
		Log:       log,
	})
	if err := reg.Register(NewCollector(m)); err != nil {
		return fmt.Errorf("register usage metrics: %w", err)
	}
	log.WithFields(logrus.Fields{"procRoot": c.ProcRoot, "bundleDir": c.BundleDir, "interval": c.Interval, "idleAfter": c.IdleAfter}).Info("scanning GPU usage")
	m.Run(ctx, c.Interval)
	return nil
}
