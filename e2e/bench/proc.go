package main

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
)

// startProcess starts a product binary as a harness.Process and says so.
func startProcess(name, logPath string, argv ...string) (*harness.Process, error) {
	p, err := harness.StartProcess(name, logPath, argv...)
	if err != nil {
		return nil, err
	}
	logf("%s started (pid %d): %s", name, p.Pid(), strings.Join(argv, " "))
	return p, nil
}

// How every *_rss_mb key is sampled: rssSettle after the load, then
// rssSamples samples rssInterval apart; the key is their median.
const (
	rssSettle   = 2 * time.Second
	rssInterval = 500 * time.Millisecond
	rssSamples  = 5
)

// rssMethod says in a report note how the RSS was sampled.
var rssMethod = fmt.Sprintf("median of %d samples %g s apart, %g s after the load", rssSamples, rssInterval.Seconds(), rssSettle.Seconds())

// steadyRSS waits rssSettle, then samples the VmRSS of a process
// rssSamples times, rssInterval apart, and returns the samples in MiB.
func steadyRSS(pid int) ([]float64, error) {
	time.Sleep(rssSettle)
	out := make([]float64, 0, rssSamples)
	for i := range rssSamples {
		if i > 0 {
			time.Sleep(rssInterval)
		}
		mb, err := RSSMB(pid)
		if err != nil {
			return nil, fmt.Errorf("pid %d: %w", pid, err)
		}
		out = append(out, mb)
	}
	return out, nil
}

// runningRSS is steadyRSS of p, and p's exit error if it is no longer
// running after the samples.
func runningRSS(p *harness.Process) ([]float64, error) {
	rss, err := steadyRSS(p.Pid())
	if err != nil {
		return nil, err
	}
	if !p.Running() {
		return nil, p.Exited()
	}
	return rss, nil
}

// recordBinaries notes the size and build tags of the product binaries
// measured, since their size is most of their resident memory (the
// kernel maps a binary's cached pages around every page it touches).
func (b *bench) recordBinaries() {
	for _, name := range []string{"dri-cdi-agent", "dri-cdi-nri"} {
		path := filepath.Join(b.cfg.BinDir, name)
		st, err := os.Stat(path)
		if err != nil {
			continue
		}
		tags := "none"
		if bi, err := buildinfo.ReadFile(path); err == nil {
			for _, s := range bi.Settings {
				if s.Key == "-tags" {
					tags = s.Value
				}
			}
		}
		b.report.Params.Versions[name] = fmt.Sprintf("%.1f MiB binary, build tags: %s", float64(st.Size())/(1<<20), tags)
	}
}
