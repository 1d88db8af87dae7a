package harness

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// The soak: GPU workloads created and deleted without pause on one
// cluster node while faults are injected at seeded random moments, and
// the invariants of docs/soak.md checked as it goes (soak_check.go).
// Every random choice (workload kinds and lifetimes, fault kinds, times
// and durations, cards) comes from the seed, so a failing run can be
// replayed; the timing of the real components around them cannot.

// SoakOptions describe one soak run.
type SoakOptions struct {
	// Mode is SoakDevicePlugin or SoakDRA.
	Mode string
	// Seed seeds every random choice.
	Seed uint64
	// Resource is the device plugin's resource name.
	Resource string
	// Kinds are the workload kinds to churn.
	Kinds []string
	// Faults are the faults to inject.
	Faults []Fault
	// Workloads is how many workloads live at once.
	Workloads int
	// Bound is how long after a fault healed (or after it was scheduled)
	// a pod whose card is healthy may take to run.
	Bound time.Duration
	// Daemons are the product's containers whose resources are sampled,
	// by container name, with their metrics port.
	Daemons map[string]int
	// DaemonPods selects the product's pods in DaemonNamespace.
	DaemonNamespace, DaemonPods string
}

// Fault is one kind of fault.
type Fault struct {
	Kind string
	// Inject puts the fault in place and returns what heals it.
	Inject func(ctx context.Context, s *Soak) (heal func(context.Context) error, err error)
}

// Soak is one soak run on a cluster's node.
type Soak struct {
	c     *Cluster
	opts  SoakOptions
	log   Logger
	churn *rand.Rand
	fault *rand.Rand

	mu        sync.Mutex
	live      []*soakLive
	pods      map[string]*soakPodRecord
	checked   map[string]bool
	held      map[string]heldContainer // running container ID -> its DRM numbers
	topo      []topoEntry
	active    string
	lastHeal  time.Time
	healed    []time.Time
	seq       int
	stats     SoakStats
	baseline  *SoakSnapshot
	harnessEr []error
}

type soakLive struct {
	w     *soakWorkload
	until time.Time
}

// SoakStats is what the summary reports.
type SoakStats struct {
	Mode     string
	Seed     uint64
	Duration time.Duration
	// Created and Deleted count workloads, by kind.
	Created, Deleted map[string]int
	// Pods counts pods created.
	Pods int
	// Faults counts faults injected, by kind.
	Faults map[string]int
	// TimeToRunning holds, per pod that ran, the time from its being
	// scheduled (or from the last heal, when later) to its first
	// container start, at the API's one-second resolution.
	TimeToRunning []time.Duration
	// Checked and Unchecked count containers whose devices were (or,
	// gone before their allocation could be read, were not) checked.
	Checked, Unchecked int
	// HeldThroughRenumber lists containers that kept running through an
	// unbind while another card took the unbound card's numbers.
	HeldThroughRenumber []string
	// WithoutCard lists containers that started without a device node
	// of a card allocated to them.
	WithoutCard []string
	// Failed counts pods that failed for good, by reason.
	Failed map[string]int
	// Failures counts what the pods were told when a container could not
	// be created or started, and Warning events, by "reason: message".
	Failures map[string]int
	// Violations are the invariant violations.
	Violations []string
	// Start and End are the leak snapshots.
	Start, End *SoakSnapshot
}

// NewSoak prepares a soak on the cluster's node.
func NewSoak(c *Cluster, log Logger, opts SoakOptions) *Soak {
	s := &Soak{
		c: c, opts: opts, log: log,
		churn:   rand.New(rand.NewPCG(opts.Seed, stream(opts.Mode, 1))),
		fault:   rand.New(rand.NewPCG(opts.Seed, stream(opts.Mode, 2))),
		pods:    map[string]*soakPodRecord{},
		checked: map[string]bool{},
		held:    map[string]heldContainer{},
		stats: SoakStats{Mode: opts.Mode, Seed: opts.Seed, Created: map[string]int{}, Deleted: map[string]int{},
			Faults: map[string]int{}, Failed: map[string]int{}, Failures: map[string]int{}},
	}
	return s
}

// stream numbers a random stream of a mode, so that the device-plugin
// and the DRA run of one seed make different choices.
func stream(mode string, n uint64) uint64 {
	h := fnv.New64a()
	h.Write([]byte(mode))
	return h.Sum64() + n
}

// Node is the soak's node.
func (s *Soak) Node() *Node { return s.c.Node }

// Cluster is the soak's cluster.
func (s *Soak) Cluster() *Cluster { return s.c }

// Rand is the fault stream's random source, for injectors' choices.
func (s *Soak) Rand() *rand.Rand { return s.fault }

// Logf logs a line of the soak.
func (s *Soak) Logf(format string, args ...any) { s.log.Logf("soak: "+format, args...) }

// Start takes the leak baseline and the node's first topology; the
// DaemonSet must be ready.
func (s *Soak) Start(ctx context.Context) error {
	if s.opts.Mode == SoakDRA {
		for _, m := range SoakTemplates() {
			if _, err := s.c.KubectlStdin(ctx, m, "apply", "-f", "-"); err != nil {
				return err
			}
		}
	}
	if err := s.RecordTopology(); err != nil {
		return err
	}
	snap, err := s.snapshot(ctx)
	if err != nil {
		return fmt.Errorf("soak baseline: %w", err)
	}
	s.baseline = snap
	s.stats.Start = snap
	return nil
}

// Run churns workloads, injects faults and checks the invariants for d,
// then heals the last fault, checks that every scheduled pod runs within
// the bound, deletes the workloads and checks for leaks. It returns an
// error only when the harness itself failed; invariant violations are in
// the stats.
func (s *Soak) Run(ctx context.Context, d time.Duration) (*SoakStats, error) {
	start := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); s.churnLoop(runCtx) }()
	go func() { defer wg.Done(); s.faultLoop(runCtx) }()
	go func() { defer wg.Done(); s.checkLoop(runCtx) }()
	wg.Wait()
	s.stats.Duration = time.Since(start).Round(time.Second)
	s.Logf("churn over after %s; draining", s.stats.Duration)
	if err := s.drain(ctx); err != nil {
		s.harnessError(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return &s.stats, errors.Join(s.harnessEr...)
}

func (s *Soak) harnessError(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Logf("harness error: %v", err)
	s.harnessEr = append(s.harnessEr, err)
}

func (s *Soak) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.Logf("VIOLATION: %s", msg)
	s.stats.Violations = append(s.stats.Violations, msg)
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

// churnLoop creates workloads up to opts.Workloads and deletes each at
// the end of its random lifetime.
func (s *Soak) churnLoop(ctx context.Context) {
	for sleep(ctx, between(s.churn, time.Second, 3*time.Second)) {
		s.mu.Lock()
		var expired []*soakLive
		now := time.Now()
		s.live = slices.DeleteFunc(s.live, func(l *soakLive) bool {
			if now.After(l.until) {
				expired = append(expired, l)
				return true
			}
			return false
		})
		room := s.opts.Workloads - len(s.live)
		s.mu.Unlock()
		for _, l := range expired {
			s.deleteWorkload(ctx, l.w)
		}
		if room <= 0 {
			continue
		}
		s.mu.Lock()
		s.seq++
		kind := s.opts.Kinds[s.churn.IntN(len(s.opts.Kinds))]
		name := fmt.Sprintf("soak-%s-%d", kind, s.seq)
		life := between(s.churn, 8*time.Second, 30*time.Second)
		s.mu.Unlock()
		w, err := newSoakWorkload(s.opts.Mode, kind, name, s.opts.Resource)
		if err != nil {
			s.harnessError(err)
			return
		}
		if err := s.createWorkload(ctx, w); err != nil {
			s.Logf("create %s: %v", name, err)
			continue
		}
		s.mu.Lock()
		s.live = append(s.live, &soakLive{w: w, until: time.Now().Add(life)})
		s.mu.Unlock()
	}
}

// createWorkload creates a workload's objects one by one. The end of the
// churn does not cut a workload in half: its objects are created with a
// context the run's end does not cancel. A workload that still fails to
// be created is deleted again, so that no object of it is left for the
// drain to wait for.
func (s *Soak) createWorkload(ctx context.Context, w *soakWorkload) error {
	ctx = context.WithoutCancel(ctx)
	for _, m := range w.manifests {
		if _, err := s.c.KubectlStdin(ctx, m, "create", "-f", "-"); err != nil {
			s.deleteObjects(ctx, w)
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Created[w.kind]++
	for _, p := range w.pods {
		s.stats.Pods++
		s.pods[p] = &soakPodRecord{name: p, kind: w.kind}
	}
	return nil
}

// deleteWorkload deletes a workload's pods (then its shared claim)
// without waiting; the pods' records stay until they are gone.
func (s *Soak) deleteWorkload(ctx context.Context, w *soakWorkload) {
	s.deleteObjects(ctx, w)
	s.mu.Lock()
	s.stats.Deleted[w.kind]++
	s.mu.Unlock()
}

// deleteObjects deletes a workload's pods, then its shared claim,
// without waiting; objects never created are no error.
func (s *Soak) deleteObjects(ctx context.Context, w *soakWorkload) {
	args := append([]string{"delete", "pod", "-n", "default", "--wait=false", "--ignore-not-found"}, w.pods...)
	if _, err := s.c.Kubectl(context.WithoutCancel(ctx), args...); err != nil {
		s.Logf("delete %s: %v", w.name, err)
	}
	if w.claim != "" {
		_, _ = s.c.Kubectl(context.WithoutCancel(ctx), "delete", "resourceclaim", "-n", "default", "--wait=false", "--ignore-not-found", w.claim)
	}
}

// faultLoop injects one fault at a time: a random pause, a random kind,
// held for a random time, then healed.
func (s *Soak) faultLoop(ctx context.Context) {
	for sleep(ctx, between(s.fault, 4*time.Second, 12*time.Second)) {
		f := s.opts.Faults[s.fault.IntN(len(s.opts.Faults))]
		hold := between(s.fault, 3*time.Second, 12*time.Second)
		bg := context.WithoutCancel(ctx)
		s.mu.Lock()
		s.active = f.Kind
		s.mu.Unlock()
		s.Logf("fault %s: inject", f.Kind)
		heal, err := f.Inject(bg, s)
		if err != nil {
			s.harnessError(fmt.Errorf("inject %s: %w", f.Kind, err))
		}
		s.mu.Lock()
		s.stats.Faults[f.Kind]++
		s.mu.Unlock()
		if heal != nil {
			sleep(bg, hold)
			if err := heal(bg); err != nil {
				s.harnessError(fmt.Errorf("heal %s: %w", f.Kind, err))
			}
		}
		s.Logf("fault %s: healed", f.Kind)
		s.mu.Lock()
		s.active = ""
		s.lastHeal = time.Now()
		s.healed = append(s.healed, s.lastHeal)
		s.mu.Unlock()
	}
}

func (s *Soak) checkLoop(ctx context.Context) {
	for sleep(ctx, 1500*time.Millisecond) {
		if err := s.check(context.WithoutCancel(ctx), false); err != nil {
			s.Logf("check: %v", err)
		}
	}
}

// drain ends the run: every pod scheduled must run within the bound,
// the failures the pods were told are collected, the workloads go, and
// the node must come back to its baseline.
func (s *Soak) drain(ctx context.Context) error {
	deadline := time.Now().Add(s.opts.Bound + 10*time.Second)
	for {
		if err := s.check(ctx, false); err != nil {
			s.Logf("check: %v", err)
		}
		if s.allSettled() || time.Now().After(deadline) {
			break
		}
		time.Sleep(1500 * time.Millisecond)
	}
	if err := s.check(ctx, true); err != nil {
		return err
	}
	if err := s.collectEvents(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	live := s.live
	s.live = nil
	s.mu.Unlock()
	for _, l := range live {
		s.deleteWorkload(ctx, l.w)
	}
	if err := poll(ctx, 2*time.Minute, func() (bool, error) {
		pods, err := s.soakPods(ctx)
		return err == nil && len(pods) == 0, nil
	}); err != nil {
		return fmt.Errorf("soak pods still there after deletion: %w", err)
	}
	return s.checkLeaks(ctx)
}

// Summary is the run's one summary, for the log.
func (st *SoakStats) Summary() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("==== soak summary: %s node, seed %d, churn %s ====", st.Mode, st.Seed, st.Duration)
	p("workloads created %s (%d pods), deleted %s", counts(st.Created), st.Pods, counts(st.Deleted))
	p("faults injected: %s", counts(st.Faults))
	p("containers checked: %d (gone before their allocation could be read: %d)", st.Checked, st.Unchecked)
	ttr := func(pct int) time.Duration { return percentile(st.TimeToRunning, pct).Round(10 * time.Millisecond) }
	p("time to running (scheduled, or healed when later -> first start; the API's times have 1 s resolution): p50 %s, p99 %s, max %s, n=%d",
		ttr(50), ttr(99), ttr(100), len(st.TimeToRunning))
	p("containers running through an unbind while another card took its numbers (known limitation): %d %v", len(st.HeldThroughRenumber), st.HeldThroughRenumber)
	p("containers started without an allocated card's node: %d %v", len(st.WithoutCard), st.WithoutCard)
	p("pods failed for good: %s", counts(st.Failed))
	p("what the pods were told (count):")
	for _, k := range sortedKeys(st.Failures) {
		p("  %4d  %s", st.Failures[k], k)
	}
	if st.Start != nil && st.End != nil {
		p("daemons (start -> end):")
		for _, name := range sortedKeys(st.Start.Daemons) {
			a, z := st.Start.Daemons[name], st.End.Daemons[name]
			p("  %-6s rss %.1f -> %.1f MiB, fds %d -> %d, goroutines %d -> %d, restarts %d -> %d",
				name, a.RSS/(1<<20), z.RSS/(1<<20), a.FDs, z.FDs, a.Goroutines, z.Goroutines, a.Restarts, z.Restarts)
		}
		p("spec files %d -> %d, sockets %d -> %d, checkpoint claims %d -> %d",
			len(st.Start.SpecFiles), len(st.End.SpecFiles), len(st.Start.Sockets), len(st.End.Sockets), st.Start.CheckpointClaims, st.End.CheckpointClaims)
	}
	p("invariant violations: %d", len(st.Violations))
	for _, v := range st.Violations {
		p("  - %s", v)
	}
	p("seed %d (replay with SOAK_SEED=%d)", st.Seed, st.Seed)
	return b.String()
}

func counts[V int | float64](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %v", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// percentile is the nearest-rank percentile of ds (0 when empty).
func percentile(ds []time.Duration, pct int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (pct*len(s) + 99) / 100
	return s[max(i-1, 0)]
}

// topoEntry is the node's cards by device number ("226:N" -> card ID)
// from a moment on.
type topoEntry struct {
	from  time.Time
	cards map[string]string
}

// RecordTopology reads which card holds which DRM device number from the
// node's (fake) sysfs, <sysfs>/dev/char/226:N, and records it from now
// on. An injector that changes the tree calls it right after.
func (s *Soak) RecordTopology() error {
	cards, err := HostCardsByNumber(s.c.Node.SysfsRoot)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.topo = append(s.topo, topoEntry{from: time.Now(), cards: cards})
	return nil
}

// Cards returns the node's fake cards as the tree has them now.
func (s *Soak) Cards() []drmtest.GPU { return s.c.Node.Tree.GPUs() }
