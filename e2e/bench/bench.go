package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
)

// Config is what one run measures and where.
type Config struct {
	// Out is the JSON file written; "" is _output/bench.json in the
	// repository.
	Out string
	// Dir is the base directory for fake trees and spec files; a tmpfs
	// (/dev/shm) like the /sys and /var/run/cdi they stand for.
	Dir string
	// BinDir holds dri-cdi-agent and dri-cdi-nri; "" is bin/ in the
	// repository.
	BinDir string
	// Containers is the number of containers per arm of each container
	// comparison; Block is how many of them run before the NRI plugin is
	// connected or disconnected.
	Containers, Block int
	// Only, when set, names the steps to run (stepKeys); the keys of the
	// others are skipped.
	Only []string
	// Repetitions of the other measurements.
	handlerCalls, podResourcesCalls, allocateCalls int
	kubeletPodResourcesCalls                       int
	scanReps16, scanReps128, hotplugReps           int
	// SkipContainerd leaves out the measurements through containerd.
	SkipContainerd bool
	// SkipCluster leaves out the pod start through the scheduler (a real
	// cluster, DRA against the device plugin).
	SkipCluster bool
	// clusterBlocks is the number of blocks per arm of the pod start;
	// clusterPodsPerBlock the timed pods in each.
	clusterBlocks, clusterPodsPerBlock int
}

// DefaultConfig is a full run.
func DefaultConfig() Config {
	return Config{
		Dir:        "/dev/shm",
		Containers: 200, Block: 20,
		handlerCalls: 20000, podResourcesCalls: 5000, allocateCalls: 3000,
		kubeletPodResourcesCalls: 600,
		scanReps16:               300, scanReps128: 60, hotplugReps: 40,
		clusterBlocks: 4, clusterPodsPerBlock: 5,
	}
}

// Scale multiplies every repetition count by f (at least 1 of each, and
// containers stay a multiple of the block), for quick trial runs.
func (c *Config) Scale(f float64) {
	s := func(n int) int { return max(1, int(float64(n)*f)) }
	c.handlerCalls, c.podResourcesCalls, c.allocateCalls = s(c.handlerCalls), s(c.podResourcesCalls), s(c.allocateCalls)
	c.kubeletPodResourcesCalls = s(c.kubeletPodResourcesCalls)
	c.scanReps16, c.scanReps128, c.hotplugReps = s(c.scanReps16), s(c.scanReps128), s(c.hotplugReps)
	c.clusterBlocks, c.clusterPodsPerBlock = s(c.clusterBlocks), s(c.clusterPodsPerBlock)
	c.Containers = s(c.Containers)
	c.Block = min(c.Block, c.Containers)
	c.Containers = (c.Containers + c.Block - 1) / c.Block * c.Block
}

// resolve makes the paths absolute, filling in the repository defaults.
func (c *Config) resolve() error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if c.Out == "" {
		c.Out = filepath.Join(root, "_output", "bench.json")
	}
	if c.BinDir == "" {
		c.BinDir = filepath.Join(root, "bin")
	}
	for _, p := range []*string{&c.Out, &c.BinDir, &c.Dir} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	return nil
}

// bench is one run.
type bench struct {
	cfg    Config
	report *Report
	tmp    string

	mu    sync.Mutex
	suite *harness.Suite // set once, before the measurements
	// lock is the machine lock when no suite holds it (lockWithoutSuite).
	lock  *harness.Lock
	procs []*harness.Process
	// socketDirs are the short directories of socketDir.
	socketDirs []string
	// scanWrite holds the scan_write_ms_<n> samples in ms, by card count.
	scanWrite map[int][]float64
	// interrupted is set by a signal; the run then writes nothing.
	interrupted atomic.Bool
}

// track remembers a started binary, so that an interrupted run stops it.
func (b *bench) track(p *harness.Process) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.procs = append(b.procs, p)
}

// cleanup stops every binary the run started, tears the harness down and
// removes the run's directory. It may run twice (signal and return).
func (b *bench) cleanup() {
	b.mu.Lock()
	procs, suite, socketDirs, lock := b.procs, b.suite, b.socketDirs, b.lock
	b.procs, b.socketDirs, b.lock = nil, nil, nil
	b.mu.Unlock()
	for _, p := range procs {
		p.Stop(syscall.SIGTERM, 10*time.Second)
	}
	if suite != nil {
		if err := suite.Close(); err != nil {
			logf("teardown: %v", err)
		}
	}
	_ = lock.Release()
	if b.tmp != "" {
		_ = os.RemoveAll(b.tmp)
	}
	for _, dir := range socketDirs {
		_ = os.RemoveAll(dir)
	}
}

// socketDir makes a directory for unix sockets in the system's temp dir,
// because b.tmp can be too deep for a socket path (at most about 100
// bytes). cleanup removes it with b.tmp, on every exit path.
func (b *bench) socketDir() (string, error) {
	dir, err := os.MkdirTemp("", "dcb")
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.socketDirs = append(b.socketDirs, dir)
	return dir, nil
}

// startPodResources starts a fake kubelet PodResources server on a socket
// in a socketDir.
func (b *bench) startPodResources() (*podresourcestest.Server, error) {
	dir, err := b.socketDir()
	if err != nil {
		return nil, err
	}
	return podresourcestest.Start(filepath.Join(dir, "kubelet.sock"))
}

// onSignal cleans up and exits with status 130 on SIGINT, SIGTERM or
// SIGHUP, so an interrupted run leaves no process, mount or file behind.
func (b *bench) onSignal() (stop func()) {
	return harness.OnSignal(func(sig os.Signal) {
		b.interrupted.Store(true)
		logf("%v: cleaning up", sig)
		b.cleanup()
	})
}

// logf prints a progress line on stderr.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// Logf makes logf a harness.Logger.
type stderrLogger struct{}

func (stderrLogger) Logf(format string, args ...any) { logf(format, args...) }

// containerKeys are the keys measured through containerd and the real
// kubelet, which -skip-containerd leaves out.
var containerKeys = []string{"nri_create_ratio", "nri_cdi_vs_nri_ratio", "nri_verify_cdi_ratio", "nri_inject_ratio",
	"nri_burst_plain_ratio", "nri_rss_mb", "agent_cold_start_ms", "kubelet_restart_reregister_ms"}

// Run measures everything, in this order: in process, the binaries
// against a fake kubelet, the container path through containerd, then the
// agent with and without usage scans (or the steps of cfg.Only). A
// measurement that fails is recorded and the others still run.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.checkOnly(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("bench must run as root: the fake DRM trees need real char device nodes (mknod), and containerd runs containers")
	}
	b := &bench{cfg: cfg, report: NewReport(), scanWrite: map[int][]float64{}}
	p := &b.report.Params
	p.Machine = ReadMachine()
	p.Started = time.Now().UTC().Format(time.RFC3339)
	p.Repetitions = map[string]int{}
	p.Dirs = map[string]string{}
	p.Versions = map[string]string{}
	b.recordBinaries()
	if la, err := LoadAvg(); err == nil {
		p.LoadAvgBefore = la
	}
	start := time.Now()
	tmp, err := os.MkdirTemp(cfg.Dir, "dri-cdi-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	b.tmp = tmp
	p.Dirs["fake trees and spec files"] = fmt.Sprintf("%s (%s)", cfg.Dir, FSType(tmp))
	if cfg.Containers < 200 {
		p.Notes = append(p.Notes, fmt.Sprintf("%d containers per arm, fewer than the 200 the goals are judged on", cfg.Containers))
	}

	defer b.cleanup()
	stopSignals := b.onSignal()
	defer stopSignals()

	// The harness suite comes first: it holds the machine lock for the
	// whole run.
	const containerStep = "container path through containerd"
	if err := b.selectSteps(ctx); err != nil {
		return nil, err
	}
	if cfg.SkipContainerd {
		p.Notes = append(p.Notes, "the container path through containerd was skipped (-skip-containerd)")
		b.report.Skip("-skip-containerd", containerKeys...)
	} else if !cfg.needsSuite() {
		// -only without it: selectSteps took the lock.
	} else if suite, err := b.newSuite(ctx); err != nil {
		b.report.Fail(containerStep, err)
	} else {
		b.mu.Lock()
		b.suite = suite
		b.mu.Unlock()
	}
	b.step("in-process measurements", b.inProcess)
	b.step("dri-cdi-agent with a fake kubelet", b.agentBinary)
	b.step("dri-cdi-dra with a fake kubelet and a stub API server", b.draBinary)
	if b.suite != nil {
		b.step(containerStep, func() error { return b.containerPath(ctx, b.suite) })
	}
	switch {
	case cfg.SkipCluster || cfg.SkipContainerd:
		b.report.Skip("-skip-cluster or -skip-containerd", append(slices.Clone(stepKeys[stepCluster]), stepKeys[stepSchedule]...)...)
	case b.suite != nil:
		b.step("pod start through the scheduler, DRA vs device plugin", func() error { return b.clusterPodStart(ctx, b.suite) })
		b.step(schedStep, func() error { return b.schedulePlacement(ctx, b.suite) })
	}

	b.step(usageStep, b.usageAgents)

	if la, err := LoadAvg(); err == nil {
		p.LoadAvgAfter = la
	}
	p.DurationS = time.Since(start).Round(time.Second).Seconds()
	if b.interrupted.Load() {
		// The signal handler cleans up and exits; a partial report must
		// not replace the last complete one.
		select {}
	}
	return b.report, nil
}

func (b *bench) step(name string, f func() error) {
	if !b.cfg.runs(name) {
		return
	}
	logf("== %s", name)
	start := time.Now()
	la, _ := LoadAvg()
	err := f()
	b.report.Params.Steps = append(b.report.Params.Steps, Step{
		Name: name, DurationS: time.Since(start).Round(100 * time.Millisecond).Seconds(), LoadAvgBefore: la})
	if err != nil {
		logf("%s failed: %v", name, err)
		b.report.Fail(name, err)
		return
	}
	logf("%s took %v", name, time.Since(start).Round(time.Millisecond))
}

func (b *bench) inProcess() error {
	dir := filepath.Join(b.tmp, "inproc")
	n, err := newNode16(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range []func() error{
		func() error { return b.measureHandler(n) },
		func() error { return b.measurePodResources(n) },
		func() error { return b.measureScanWrite(dir, b.cfg.scanReps16, b.cfg.scanReps128) },
		b.scanGrowth,
	} {
		errs = append(errs, f())
	}
	return errors.Join(errs...)
}

// setSample records a key whose value is the median or p99 (stat) of a
// sample of durations, in unit.
func (b *bench) setSample(key string, unit time.Duration, ds []time.Duration, stat, note string) error {
	sum, err := Summarize(In(unit, ds))
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	v := sum.Median
	if stat == "p99" {
		v = sum.P99
	}
	b.report.Set(key, Result{Value: v, Unit: unitName(unit), Stat: stat, Sample: &sum, Note: note})
	b.report.Params.Repetitions[key] = sum.N
	logf("%s = %.4g %s (median %.4g, p99 %.4g, n %d)", key, v, unitName(unit), sum.Median, sum.P99, sum.N)
	return nil
}

func unitName(d time.Duration) string {
	switch d {
	case time.Microsecond:
		return "us"
	case time.Millisecond:
		return "ms"
	case time.Second:
		return "s"
	default:
		return d.String()
	}
}
