package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
)

// The steps -only can name.
const (
	stepInProc     = "inproc"
	stepAgent      = "agent"
	stepDRA        = "dra"
	stepContainerd = "containerd"
	stepCluster    = "cluster"
	stepSchedule   = "schedule"
	stepUsage      = "usage"
)

// usageStep is the name the usage step logs.
const usageStep = "dri-cdi-agent with and without --usage over a fake proc tree"

// stepNames maps the name each step logs (bench.step) to its -only name.
var stepNames = map[string]string{
	"in-process measurements":                               stepInProc,
	"dri-cdi-agent with a fake kubelet":                     stepAgent,
	"dri-cdi-dra with a fake kubelet and a stub API server": stepDRA,
	"container path through containerd":                     stepContainerd,
	"pod start through the scheduler, DRA vs device plugin": stepCluster,
	schedStep: stepSchedule,
	usageStep: stepUsage,
}

// usageKeys are the keys of the usage step.
var usageKeys = []string{"usage_scan_cpu_pct", "usage_scan_cpu_ms", "usage_scan_ms",
	"agent_usage_rss_mb", "agent_usage_off_rss_mb", "agent_usage_rss_delta_mb"}

// stepKeys are the keys each step measures.
var stepKeys = map[string][]string{
	stepInProc: {"nri_handler_p99_us_plain", "nri_handler_p99_us_gpu", "podresources_p99_us",
		"scan_write_ms_16", "scan_write_ms_128", "scan_write_growth_128", "scan_resync_ms_16"},
	stepAgent: {"allocate_p99_us", "hotplug_ms", "agent_rss_mb"},
	stepDRA: {"dra_prepare_p99_us", "dra_prepare_vs_allocate_ratio", "dra_rss_mb",
		"dra_prepare_shared_p99_us", "dra_prepare_shared_vs_exclusive_ratio"},
	stepContainerd: containerKeys,
	stepCluster:    {"dra_pod_start_ratio", "dra_start_to_slice_ms", "dra_prepare_kubelet_p50_us", "dra_prepare_kubelet_p99_us"},
	stepSchedule:   {"dra_schedule_shared_p50_us", "dra_schedule_exclusive_p50_us", "dra_schedule_shared_vs_exclusive_ratio"},
	stepUsage:      usageKeys,
}

// stepIDs are the -only names, sorted.
func stepIDs() []string { return slices.Sorted(maps.Keys(stepKeys)) }

// selected reports whether the step of -only name id runs: every step
// unless -only names others.
func (c *Config) selected(id string) bool {
	return len(c.Only) == 0 || slices.Contains(c.Only, id)
}

// needsSuite reports whether the run starts the harness suite (which
// holds the machine lock): for the container path, or for the cluster
// steps, which run on the suite's node.
func (c *Config) needsSuite() bool {
	return !c.SkipContainerd && (c.selected(stepContainerd) ||
		(!c.SkipCluster && (c.selected(stepCluster) || c.selected(stepSchedule))))
}

// runs reports whether the step that logs name runs.
func (c *Config) runs(name string) bool {
	return len(c.Only) == 0 || c.selected(stepNames[name])
}

// checkOnly checks that -only names known steps.
func (c *Config) checkOnly() error {
	for _, s := range c.Only {
		if _, ok := stepKeys[s]; !ok {
			return fmt.Errorf("-only: unknown step %q (steps: %s)", s, strings.Join(stepIDs(), ", "))
		}
	}
	return nil
}

// selectSteps skips the keys of the steps -only leaves out, and takes the
// machine lock when the containerd step, whose suite holds it otherwise,
// does not run: e2e runs stay off the machine while it measures.
func (b *bench) selectSteps(ctx context.Context) error {
	cfg := &b.cfg
	if len(cfg.Only) > 0 {
		b.report.Params.Notes = append(b.report.Params.Notes, "only the steps "+strings.Join(cfg.Only, ", ")+" ran (-only)")
		for id, keys := range stepKeys {
			if !cfg.selected(id) {
				b.report.Skip("-only", keys...)
			}
		}
	}
	if cfg.needsSuite() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	logf("waiting for the e2e machine lock %s", harness.LockPath)
	lock, err := harness.AcquireLock(ctx, harness.LockPath)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.lock = lock
	b.mu.Unlock()
	return nil
}
