package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/usage"
	"github.com/dri-cdi/dri-cdi/pkg/usage/usagetest"
)

// The node of the usage keys: usageProcs processes in usageContainers
// containers, every usageClientEvery-th of them holding one DRM client of
// one of the 12 cards with a render node that writes usage stats (the
// virtio-gpu cards of Mixed(16) write none), each process with
// usageOtherFDs other fds (files and sockets), as BenchmarkScan.
const (
	usageProcs       = 200
	usageClientEvery = 4 // 50 clients
	usageContainers  = 25
	usageOtherFDs    = 20
	// usageInterval is the agent's --usage-interval in the bench: short,
	// so that a window holds many scans; the CPU per scan is then put
	// against the default interval.
	usageInterval = time.Second
)

// usageAgents runs two dri-cdi-agent binaries side by side on the same
// fake tree of 16 cards, each with its own fake kubelet and CDI dir: one
// with --usage over a fake proc tree of usageProcs processes holding
// usageProcs/usageClientEvery DRM clients, one without. It measures the
// CPU the scans cost (the two agents' CPU time over the same windows,
// per scan the usage agent completed) against the default interval, the
// two agents' RSS, and in process the wall time of one scan of the same
// tree.
func (b *bench) usageAgents() error {
	bin := filepath.Join(b.cfg.BinDir, "dri-cdi-agent")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w (run make build)", err)
	}
	dir := filepath.Join(b.tmp, "usage")
	gpus := drmtest.Mixed(16)
	tree, err := drmtest.NewTree(filepath.Join(dir, "tree"), gpus...)
	if err != nil {
		return err
	}
	roots := tree.Roots()
	proc, bundles, clients, err := usageProcTree(dir, roots, gpus)
	if err != nil {
		return err
	}

	type arm struct {
		p       *harness.Process
		k       *kubelettest.Kubelet
		metrics string
	}
	start := func(name string, extra ...string) (*arm, error) {
		kdir, err := b.socketDir()
		if err != nil {
			return nil, err
		}
		k, err := kubelettest.Start(kdir)
		if err != nil {
			return nil, err
		}
		addr, err := freeLoopbackAddr()
		if err != nil {
			k.Stop()
			return nil, err
		}
		args := append([]string{bin, "--sysfs-root=" + roots.Sysfs, "--dev-root=" + roots.Dev,
			"--cdi-dir=" + filepath.Join(dir, name, "cdi"), "--kubelet-dir=" + kdir,
			"--delivery=cdi-cri", "--metrics-addr=" + addr}, extra...)
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			k.Stop()
			return nil, err
		}
		p, err := startProcess("dri-cdi-agent ("+name+")", filepath.Join(dir, name, "agent.log"), args...)
		if err != nil {
			k.Stop()
			return nil, err
		}
		b.track(p)
		a := &arm{p: p, k: k, metrics: "http://" + addr + "/metrics"}
		// Registered with its kubelet like the agent of agentBinary: four
		// resources of four cards.
		for _, g := range drmtest.Mixed(4) {
			if _, err := waitDevices(p, k, config.DefaultPoolResource(g.Driver), 30*time.Second, func(ids []string) bool { return len(ids) == 4 }); err != nil {
				p.Stop(syscall.SIGTERM, 10*time.Second)
				k.Stop()
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		return a, nil
	}
	on, err := start("usage-on", "--usage=true", "--usage-interval="+usageInterval.String(),
		"--proc-root="+proc.Root, "--usage-bundle-dir="+bundles)
	if err != nil {
		return err
	}
	defer on.k.Stop()
	defer on.p.Stop(syscall.SIGTERM, 10*time.Second)
	off, err := start("usage-off")
	if err != nil {
		return err
	}
	defer off.k.Stop()
	defer off.p.Stop(syscall.SIGTERM, 10*time.Second)

	// The scans must see the whole tree, named, or the cost would be of
	// less work than the key says.
	if err := waitUsageScans(on.p, on.metrics, 3, clients); err != nil {
		return err
	}

	// CPU: both agents over the same windows; what the usage agent
	// spends more, per scan it completed in the window.
	const windows, window = 6, 10 * time.Second
	perScan := make([]float64, 0, windows) // ms of CPU per scan
	var scans int
	for range windows {
		s0, err := usageScans(on.metrics)
		if err != nil {
			return err
		}
		on0, err1 := cpuTime(on.p.Pid())
		off0, err2 := cpuTime(off.p.Pid())
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		time.Sleep(window)
		on1, err1 := cpuTime(on.p.Pid())
		off1, err2 := cpuTime(off.p.Pid())
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		s1, err := usageScans(on.metrics)
		if err != nil {
			return err
		}
		n := s1 - s0
		if n <= 0 {
			return fmt.Errorf("the usage agent completed no scan in %v", window)
		}
		scans += n
		extra := (on1 - on0) - (off1 - off0)
		perScan = append(perScan, float64(extra.Microseconds())/1000/float64(n))
	}
	for _, a := range []*arm{on, off} {
		if !a.p.Running() {
			return a.p.Exited()
		}
	}
	cpu, err := Summarize(perScan)
	if err != nil {
		return fmt.Errorf("usage_scan_cpu_ms: %w", err)
	}
	b.report.Set("usage_scan_cpu_ms", Result{Value: cpu.Median, Sample: &cpu,
		Note: fmt.Sprintf("CPU time (utime+stime) of the dri-cdi-agent with --usage minus that of the same agent without it, over the same %d windows of %v, per scan the first completed (%d scans at --usage-interval=%v); %d processes, %d DRM clients of %d cards, %d other fds each",
			windows, window, scans, usageInterval, usageProcs, clients, 12, usageOtherFDs)})
	b.report.Params.Repetitions["usage_scan_cpu_ms"] = scans
	pct := cpu.Median / float64(usage.DefaultInterval.Milliseconds()) * 100
	b.report.Set("usage_scan_cpu_pct", Result{Value: pct,
		Note: fmt.Sprintf("usage_scan_cpu_ms / the default --usage-interval (%v) in percent of one core", usage.DefaultInterval)})
	logf("usage_scan_cpu_ms = %.3g (median of %d windows), usage_scan_cpu_pct = %.3g", cpu.Median, windows, pct)

	// RSS: both agents sampled at the same moments.
	time.Sleep(rssSettle)
	var rssOn, rssOff []float64
	for i := range rssSamples {
		if i > 0 {
			time.Sleep(rssInterval)
		}
		a, err1 := RSSMB(on.p.Pid())
		o, err2 := RSSMB(off.p.Pid())
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		rssOn, rssOff = append(rssOn, a), append(rssOff, o)
	}
	if err := b.setRSS("agent_usage_rss_mb", rssOn, fmt.Sprintf("dri-cdi-agent with --usage (16 cards, 4 resources, metrics server on) after %d scans", scans+3)); err != nil {
		return err
	}
	if err := b.setRSS("agent_usage_off_rss_mb", rssOff, "the same agent without --usage, on the same cards, sampled at the same moments"); err != nil {
		return err
	}
	sOn, _ := Summarize(rssOn)
	sOff, _ := Summarize(rssOff)
	b.report.Set("agent_usage_rss_delta_mb", Result{Value: sOn.Median - sOff.Median,
		Note: "agent_usage_rss_mb - agent_usage_off_rss_mb of this run"})
	logf("agent_usage_rss_delta_mb = %.3g", sOn.Median-sOff.Median)
	on.p.Stop(syscall.SIGTERM, 10*time.Second)
	off.p.Stop(syscall.SIGTERM, 10*time.Second)

	return b.measureScan(roots, proc.Root, bundles, clients)
}

// measureScan times usage.Monitor.Scan, what the agent runs every
// interval, over the same tree in process: the wall time of one scan.
func (b *bench) measureScan(roots drm.Roots, procRoot, bundles string, clients int) error {
	inv, err := discoverN(roots, 16)
	if err != nil {
		return err
	}
	m := usage.NewMonitor(usage.Options{ProcRoot: procRoot, Namer: usage.NewBundleNamer(bundles),
		Cards: func() ([]drm.Card, error) { return inv.Cards, nil }})
	const reps = 100
	ds := make([]time.Duration, 0, reps)
	for i := range reps + reps/10 {
		start := time.Now()
		snap, err := m.Scan()
		d := time.Since(start)
		if err != nil {
			return err
		}
		if got := snapClients(snap); got != clients {
			return fmt.Errorf("usage scan found %d named DRM clients, want %d", got, clients)
		}
		if i >= reps/10 {
			ds = append(ds, d)
		}
	}
	return b.setSample("usage_scan_ms", time.Millisecond, ds, "median",
		fmt.Sprintf("usage.Monitor.Scan in process over the usage agents' tree (%d processes, %d DRM clients)", usageProcs, clients))
}

// snapClients counts the clients of a snapshot that are named (namespace
// from the bundle), not the host's.
func snapClients(s *usage.Snapshot) int {
	n := 0
	for _, c := range s.Cards {
		for _, u := range c.Users {
			if u.Namespace == "bench" {
				n += u.Clients
			}
		}
	}
	return n
}

// usageProcTree writes the fake proc tree and the containers' bundles
// under dir: usageProcs processes of usageContainers containers (cgroup
// v2, systemd driver), each with usageOtherFDs other fds, every
// usageClientEvery-th with one DRM client of a card that writes usage
// stats, in its driver's fdinfo format. It returns the number of clients.
func usageProcTree(dir string, roots drm.Roots, gpus []drmtest.GPU) (*usagetest.Proc, string, int, error) {
	proc, err := usagetest.New(filepath.Join(dir, "proc"))
	if err != nil {
		return nil, "", 0, err
	}
	bundles := filepath.Join(dir, "bundles")
	var stats []drmtest.GPU
	for _, g := range gpus {
		if g.Driver != "virtio_gpu" && g.Render >= 0 {
			stats = append(stats, g)
		}
	}
	pod := func(i int) string { return fmt.Sprintf("%08x-1111-2222-3333-444455556666", i) }
	ctr := func(i int) string { return fmt.Sprintf("%064x", i+1) }
	for i := range usageContainers {
		cfg, err := json.Marshal(map[string]any{"annotations": map[string]string{
			"io.kubernetes.cri.sandbox-namespace": "bench",
			"io.kubernetes.cri.sandbox-name":      fmt.Sprintf("pod-%d", i),
			"io.kubernetes.cri.sandbox-uid":       pod(i),
			"io.kubernetes.cri.container-name":    "app",
		}})
		if err != nil {
			return nil, "", 0, err
		}
		if err := os.MkdirAll(filepath.Join(bundles, ctr(i)), 0o755); err != nil {
			return nil, "", 0, err
		}
		if err := os.WriteFile(filepath.Join(bundles, ctr(i), "config.json"), cfg, 0o644); err != nil {
			return nil, "", 0, err
		}
	}
	clients := 0
	for pid := 1; pid <= usageProcs; pid++ {
		c := pid % usageContainers
		if err := proc.AddProcess(pid, "worker", usagetest.CgroupV2Systemd(pod(c), ctr(c))); err != nil {
			return nil, "", 0, err
		}
		for fd := range usageOtherFDs {
			target := fmt.Sprintf("socket:[%d]", pid*100+fd)
			if fd%2 == 0 {
				target = fmt.Sprintf("/var/lib/app/file%d", fd)
			}
			if err := proc.SetFD(pid, fd, target, "pos:\t0\nflags:\t02\n"); err != nil {
				return nil, "", 0, err
			}
		}
		if pid%usageClientEvery != 0 {
			continue
		}
		g := stats[clients%len(stats)]
		clients++
		render := filepath.Join(roots.Dev, "dri", "renderD"+strconv.Itoa(g.Render))
		if err := proc.SetFD(pid, usageOtherFDs, render, benchFDInfo(g, uint64(pid))); err != nil {
			return nil, "", 0, err
		}
	}
	return proc, bundles, clients, nil
}

// benchFDInfo is a client's fdinfo in the format of g's driver: engine
// time (i915, amdgpu) or cycles (xe), and memory.
func benchFDInfo(g drmtest.GPU, client uint64) string {
	f := usagetest.FDInfo{Driver: g.Driver, PDev: g.ID(), ClientID: client}
	switch g.Driver {
	case "xe":
		f.Cycles = map[string]uint64{"rcs": client * 1e6, "vcs": client * 1e5, "bcs": 0, "vecs": 0, "ccs": 0}
		f.TotalCycles = map[string]uint64{"rcs": client * 1e7, "vcs": client * 1e7, "bcs": client * 1e7, "vecs": client * 1e7, "ccs": client * 1e7}
		f.Memory = map[string]uint64{"total-vram0": 65536, "resident-vram0": 65536, "total-system": 4096, "resident-system": 4096}
	case "amdgpu":
		f.Engines = map[string]uint64{"gfx": client * 1e6, "dec": client * 1e5, "enc": 0, "compute": 0}
		f.Memory = map[string]uint64{"memory-vram": 65536, "memory-gtt": 4096}
	default:
		f.Engines = map[string]uint64{"render": client * 1e6, "video": client * 1e5, "video-enhance": 0, "copy": 0, "compute": 0}
		f.Memory = map[string]uint64{"total-system0": 4096, "resident-system0": 4096}
	}
	return f.String()
}

// waitUsageScans waits until the usage agent has completed n scans that
// saw usageProcs processes and the tree's clients, all named.
func waitUsageScans(p *harness.Process, url string, n, clients int) error {
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if !p.Running() {
			return p.Exited()
		}
		m, err := scrape(url)
		if err == nil {
			scans, _ := m.Sum("dri_cdi_usage_scans_total")
			procs, _ := m.Sum("dri_cdi_usage_processes")
			named, _ := m.Sum("dri_cdi_usage_clients", "namespace", "bench")
			all, _ := m.Sum("dri_cdi_usage_clients")
			last = fmt.Sprintf("%g scans, %g processes, %g of %g clients named", scans, procs, named, all)
			if int(scans) >= n && int(procs) == usageProcs && int(named) == clients && int(all) == clients {
				return nil
			}
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the usage agent did not scan the tree (want %d processes, %d named clients): %s", usageProcs, clients, last)
}

// usageScans is dri_cdi_usage_scans_total of an agent.
func usageScans(url string) (int, error) {
	m, err := scrape(url)
	if err != nil {
		return 0, err
	}
	v, ok := m.Sum("dri_cdi_usage_scans_total")
	if !ok {
		return 0, errors.New("no dri_cdi_usage_scans_total")
	}
	return int(v), nil
}

// scrape reads an agent's /metrics.
func scrape(url string) (harness.Metrics, error) {
	return harness.ScrapeMetrics(context.Background(), url, 5*time.Second)
}

// freeLoopbackAddr is a loopback address with a port free at the time of
// the call.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat
// (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// cpuTime is the user and system CPU time of a process, all its threads,
// from /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseCPUTime(string(data))
}

// parseCPUTime reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line; the command name in parentheses may hold
// spaces, so fields are counted after its closing parenthesis.
func parseCPUTime(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat %q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14, stime 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("stat %q: too few fields", stat)
	}
	var total time.Duration
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat %q: %w", stat, err)
		}
		total += time.Duration(v) * clockTick
	}
	return total, nil
}
