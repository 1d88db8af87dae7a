package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
)

// node16 is a fake tree with 16 mixed GPUs and their CDI specs, the node
// the in-process measurements run against.
type node16 struct {
	tree     *drmtest.Tree
	cards    []drm.Card
	cdiDir   string
	card     drm.Card // the card GPU containers are allocated
	resource string   // its resource
}

func newNode16(dir string) (*node16, error) {
	tree, err := drmtest.NewTree(filepath.Join(dir, "tree"), drmtest.Mixed(16)...)
	if err != nil {
		return nil, err
	}
	inv, err := discoverN(tree.Roots(), 16)
	if err != nil {
		return nil, err
	}
	n := &node16{tree: tree, cards: inv.Cards, cdiDir: filepath.Join(dir, "cdi"), card: inv.Cards[0]}
	n.resource = config.DefaultPoolResource(n.card.Driver)
	w, err := cdi.NewWriter(n.cdiDir, cdi.DefaultKind)
	if err != nil {
		return nil, err
	}
	if _, err := w.Sync(inv.Cards); err != nil {
		return nil, err
	}
	return n, nil
}

// discoverN runs discovery and insists on n complete cards: fake nodes
// that are not char devices (not root) would silently give fewer.
func discoverN(roots drm.Roots, n int) (*drm.Inventory, error) {
	inv, err := drm.Discover(roots)
	if err != nil {
		return nil, err
	}
	if len(inv.Cards) != n || len(inv.Skipped) != 0 {
		return nil, fmt.Errorf("discovery found %d cards (skipped %v), want %d", len(inv.Cards), inv.Skipped, n)
	}
	return inv, nil
}

// kubeletContainer looks like what containerd hands NRI for a pod's
// container: the kubelet's annotations and mounts, a non-root user.
func kubeletContainer(name string, attempt int) *api.Container {
	c := &api.Container{
		Id:          fmt.Sprintf("%s-%d", name, attempt),
		Name:        name,
		Annotations: map[string]string{},
		User:        &api.User{Uid: 1000, Gid: 1000},
	}
	for _, k := range []string{
		"io.kubernetes.container.hash", "io.kubernetes.container.terminationMessagePath",
		"io.kubernetes.container.terminationMessagePolicy", "io.kubernetes.pod.terminationGracePeriod",
		"io.kubernetes.cri.container-type", "io.kubernetes.cri.container-name", "io.kubernetes.cri.image-name",
		"io.kubernetes.cri.sandbox-id", "io.kubernetes.cri.sandbox-name", "io.kubernetes.cri.sandbox-namespace",
		"io.kubernetes.cri.sandbox-uid",
	} {
		c.Annotations[k] = "value"
	}
	c.Annotations["io.kubernetes.container.restartCount"] = strconv.Itoa(attempt)
	for _, m := range []string{"/etc/hosts", "/dev/termination-log", "/etc/hostname", "/etc/resolv.conf", "/dev/shm",
		"/var/run/secrets/kubernetes.io/serviceaccount"} {
		c.Mounts = append(c.Mounts, &api.Mount{Source: "/var/lib/kubelet/pods/x" + m, Destination: m, Type: "bind"})
	}
	return c
}

func discardLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	l.SetLevel(logrus.InfoLevel)
	return logrus.NewEntry(l)
}

// measureHandler times the NRI plugin's CreateContainer handler in
// process, for a container asking nothing and one allocated one card,
// interleaved. The authorizer answers in process, so the PodResources
// round trip is not included; the spec index is loaded from real spec
// files of 16 cards, and each node is checked against the host (stat)
// and the fake sysfs's dev/char links, as deployed. Logs are formatted at info level, as deployed, and
// discarded.
func (b *bench) measureHandler(n *node16) error {
	log := discardLog()
	cfg := config.Default()
	store := nri.NewSpecIndex(n.cdiDir, cfg.Kind(), cdi.LoadDevices, nil, log)
	if err := store.Reload(); err != nil {
		return err
	}
	nodes, ok := store.Nodes(n.card.ID)
	if !ok || len(nodes) == 0 {
		return fmt.Errorf("spec index has no nodes for card %s", n.card.ID)
	}
	p, err := nri.New(nri.Config{
		Kind: cfg.Kind(), Resources: cfg, Devices: store, Log: log,
		Authorizer: podresourcestest.Fixed{n.resource: {n.card.ID}},
		// As deployed: every node is checked against the tree's
		// dev/char record too.
		Owner: nri.SysfsOwner(n.tree.Roots().Sysfs),
	})
	if err != nil {
		return err
	}
	ctx := context.Background()
	pod := &api.PodSandbox{Id: "sandbox", Name: "bench", Namespace: "default", Uid: "uid-bench"}
	plain := kubeletContainer("plain", 0)
	gpu := kubeletContainer("gpu", 0)
	k, v := alloc.Annotation(n.resource, []string{n.card.ID})
	gpu.Annotations[k] = v

	call := func(ctr *api.Container, wantNodes int) (time.Duration, error) {
		start := time.Now()
		adj, _, err := p.CreateContainer(ctx, pod, ctr)
		d := time.Since(start)
		if err != nil {
			return 0, err
		}
		if got := len(adj.GetLinux().GetDevices()); got != wantNodes {
			return 0, fmt.Errorf("container %s: handler added %d device nodes, want %d", ctr.Name, got, wantNodes)
		}
		return d, nil
	}
	calls := b.cfg.handlerCalls
	plainD, gpuD := make([]time.Duration, 0, calls), make([]time.Duration, 0, calls)
	runtime.GC()
	for i := range calls + calls/10 {
		dp, err := call(plain, 0)
		if err != nil {
			return err
		}
		dg, err := call(gpu, len(nodes))
		if err != nil {
			return err
		}
		if i >= calls/10 { // the first tenth warms up
			plainD, gpuD = append(plainD, dp), append(gpuD, dg)
		}
	}
	if err := b.setSample("nri_handler_p99_us_plain", time.Microsecond, plainD, "p99",
		"nri.Plugin.CreateContainer in process, container asking nothing, interleaved with the GPU case"); err != nil {
		return err
	}
	return b.setSample("nri_handler_p99_us_gpu", time.Microsecond, gpuD, "p99",
		fmt.Sprintf("nri.Plugin.CreateContainer in process, one card (%d nodes) from 16 cards' specs, in-process authorizer (no PodResources round trip)", len(nodes)))
}

// measurePodResources times the PodResources query the NRI plugin makes
// for a GPU container: podresources.Client over a unix socket to a fake
// kubelet PodResources server, on one kept-open connection, with the
// plugin's default deadline.
func (b *bench) measurePodResources(n *node16) error {
	srv, err := b.startPodResources()
	if err != nil {
		return err
	}
	defer srv.Stop()
	// A node with a few dozen pods; Get answers one of them.
	for i := range 40 {
		srv.SetPod("default", fmt.Sprintf("pod-%d", i), map[string]podresourcestest.Container{"app": {}, "sidecar": {}})
	}
	srv.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {n.resource: {n.card.ID}}, "sidecar": {}})
	c, err := podresources.New(srv.Socket())
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := context.Background()
	calls := b.cfg.podResourcesCalls
	ds := make([]time.Duration, 0, calls)
	runtime.GC()
	for i := range calls + calls/10 {
		cctx, cancel := context.WithTimeout(ctx, podresources.DefaultTimeout)
		start := time.Now()
		got, err := c.ContainerDevices(cctx, "default", "gpu", "app")
		d := time.Since(start)
		cancel()
		if err != nil {
			return err
		}
		if ids := got[n.resource]; len(ids) != 1 || ids[0] != n.card.ID {
			return fmt.Errorf("PodResources answered %v, want %s=%s", got, n.resource, n.card.ID)
		}
		if i >= calls/10 {
			ds = append(ds, d)
		}
	}
	return b.setSample("podresources_p99_us", time.Microsecond, ds, "p99",
		"podresources.Client.ContainerDevices (Get) over a unix socket to a fake kubelet PodResources server, one kept-open connection")
}

// scanRig is one fake tree of n GPUs and the passes measured on it.
type scanRig struct {
	n             int
	roots         drm.Roots
	outDir        string
	write, resync []time.Duration
}

func newScanRig(dir string, n int) (*scanRig, error) {
	tree, err := drmtest.NewTree(filepath.Join(dir, fmt.Sprintf("scan%d", n)), drmtest.Mixed(n)...)
	if err != nil {
		return nil, err
	}
	return &scanRig{n: n, roots: tree.Roots(), outDir: filepath.Join(dir, fmt.Sprintf("scan%d-cdi", n))}, nil
}

// pass is discovery plus cdi.Writer.Sync of its cards, timed; w nil is
// a new Writer. It requires Sync to report wantChange.
func (r *scanRig) pass(w *cdi.Writer, cdiDir string, wantChange bool) (*cdi.Writer, time.Duration, error) {
	start := time.Now()
	inv, err := discoverN(r.roots, r.n)
	if err != nil {
		return nil, 0, err
	}
	if w == nil {
		if w, err = cdi.NewWriter(cdiDir, cdi.DefaultKind); err != nil {
			return nil, 0, err
		}
	}
	changed, err := w.Sync(inv.Cards)
	d := time.Since(start)
	if err != nil {
		return nil, 0, err
	}
	if changed != wantChange {
		return nil, 0, fmt.Errorf("spec sync into %s: changed=%v, want %v", cdiDir, changed, wantChange)
	}
	return w, d, nil
}

// round is the agent's start and its periodic rescan: a write pass (a
// new Writer, an empty directory), then a resync pass (the same Writer,
// the agent keeps one; the directory as the write pass left it, so
// nothing is written). The samples are kept when keep is set.
func (r *scanRig) round(i int, keep bool) error {
	cdiDir := filepath.Join(r.outDir, strconv.Itoa(i))
	w, dw, err := r.pass(nil, cdiDir, true)
	if err != nil {
		return err
	}
	_, dr, err := r.pass(w, cdiDir, false)
	if err != nil {
		return err
	}
	files, err := os.ReadDir(cdiDir)
	if err != nil {
		return err
	}
	if len(files) != r.n+1 {
		return fmt.Errorf("%s holds %d files, want %d (one per card plus all)", cdiDir, len(files), r.n+1)
	}
	if err := os.RemoveAll(cdiDir); err != nil {
		return err
	}
	if keep {
		r.write, r.resync = append(r.write, dw), append(r.resync, dr)
	}
	return nil
}

// measureScanWrite times one full pass of what the agent does when it
// starts on a node (discovery of a fake tree, spec generation and the
// atomic write of every spec file into an empty directory) and the
// steady-state resync (the same pass when nothing changed), for 16 and
// for 128 GPUs. The two trees' rounds are interleaved, reps16/reps128
// rounds of 16 GPUs before each round of 128, so that scan_write_growth_128
// compares passes taken at the same moments of a machine whose load
// moves.
func (b *bench) measureScanWrite(dir string, reps16, reps128 int) error {
	small, err := newScanRig(dir, 16)
	if err != nil {
		return err
	}
	large, err := newScanRig(dir, 128)
	if err != nil {
		return err
	}
	per := max(1, (reps16+reps128-1)/max(reps128, 1))
	runtime.GC()
	const warmups = 2
	done16 := 0
	for i := range reps128 + warmups {
		for range per {
			if done16 >= reps16+warmups {
				break
			}
			if err := small.round(done16, done16 >= warmups); err != nil {
				return err
			}
			done16++
		}
		if err := large.round(i, i >= warmups); err != nil {
			return err
		}
	}
	where := fmt.Sprintf("on %s (%s)", dir, FSType(dir))
	var errs []error
	for _, r := range []*scanRig{small, large} {
		b.scanWrite[r.n] = In(time.Millisecond, r.write)
		errs = append(errs, b.setSample(fmt.Sprintf("scan_write_ms_%d", r.n), time.Millisecond, r.write, "median",
			fmt.Sprintf("drm.Discover of %d mixed fake GPUs + cdi.Writer.Sync into an empty dir (%d files, fsync'ed), %s, interleaved with the %s-GPU passes",
				r.n, r.n+1, where, map[int]string{16: "128", 128: "16"}[r.n])))
		errs = append(errs, b.setSample(fmt.Sprintf("scan_resync_ms_%d", r.n), time.Millisecond, r.resync, "median",
			fmt.Sprintf("the same pass when nothing changed, with the write pass's Writer as the agent's periodic resync (compare, no write), %s", where)))
	}
	return errors.Join(errs...)
}

// scanGrowth records how scan_write grows from 16 to 128 cards: the ratio
// of the medians, with a bootstrap interval. Linear growth is 8.
func (b *bench) scanGrowth() error {
	s16, s128 := b.scanWrite[16], b.scanWrite[128]
	if len(s16) == 0 || len(s128) == 0 {
		return errors.New("scan_write_growth_128: scan_write_ms_16 or scan_write_ms_128 missing")
	}
	c, err := Compare(s128, s16)
	if err != nil {
		return fmt.Errorf("scan_write_growth_128: %w", err)
	}
	a, d, ratio, lo, hi := c.Num, c.Den, c.Ratio, c.CI95[0], c.CI95[1]
	b.report.Set("scan_write_growth_128", Result{Value: ratio, Note: "scan_write_ms_128 / scan_write_ms_16: 8 cards for one is linear growth",
		Parts: map[string]Summary{"scan_write_ms_128": a, "scan_write_ms_16": d}, CI95: &[2]float64{round(lo, 4), round(hi, 4)}})
	b.report.Params.Repetitions["scan_write_growth_128"] = min(a.N, d.N)
	logf("scan_write_growth_128 = %.3f [95%% CI %.3f-%.3f]", ratio, lo, hi)
	return nil
}
