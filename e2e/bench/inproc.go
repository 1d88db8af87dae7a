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
// files of 16 cards. Logs are formatted at info level, as deployed, and
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

// measureScanWrite times one full pass of what the agent does when it
// starts on a node: discovery of a fake tree, spec generation and the
// atomic write of every spec file into an empty directory. It also times
// the steady-state resync: the same pass when nothing changed.
func (b *bench) measureScanWrite(dir string, n, reps int) error {
	tree, err := drmtest.NewTree(filepath.Join(dir, fmt.Sprintf("scan%d", n)), drmtest.Mixed(n)...)
	if err != nil {
		return err
	}
	roots := tree.Roots()
	outDir := filepath.Join(dir, fmt.Sprintf("scan%d-cdi", n))
	writers := map[string]*cdi.Writer{}
	// The write pass is the agent's start: a new Writer, an empty
	// directory. The resync pass is its periodic rescan: the same Writer
	// (the agent keeps one), the directory as the write pass left it.
	pass := func(w *cdi.Writer, cdiDir string, wantChange bool) (time.Duration, error) {
		start := time.Now()
		inv, err := discoverN(roots, n)
		if err != nil {
			return 0, err
		}
		if w == nil {
			if w, err = cdi.NewWriter(cdiDir, cdi.DefaultKind); err != nil {
				return 0, err
			}
			writers[cdiDir] = w
		}
		changed, err := w.Sync(inv.Cards)
		d := time.Since(start)
		if err != nil {
			return 0, err
		}
		if changed != wantChange {
			return 0, fmt.Errorf("spec sync into %s: changed=%v, want %v", cdiDir, changed, wantChange)
		}
		return d, nil
	}
	write, resync := make([]time.Duration, 0, reps), make([]time.Duration, 0, reps)
	runtime.GC()
	for i := range reps + 2 {
		cdiDir := filepath.Join(outDir, strconv.Itoa(i))
		dw, err := pass(nil, cdiDir, true)
		if err != nil {
			return err
		}
		dr, err := pass(writers[cdiDir], cdiDir, false)
		delete(writers, cdiDir)
		if err != nil {
			return err
		}
		files, err := os.ReadDir(cdiDir)
		if err != nil {
			return err
		}
		if len(files) != n+1 {
			return fmt.Errorf("%s holds %d files, want %d (one per card plus all)", cdiDir, len(files), n+1)
		}
		if err := os.RemoveAll(cdiDir); err != nil {
			return err
		}
		if i >= 2 { // two warm-up passes
			write, resync = append(write, dw), append(resync, dr)
		}
	}
	b.scanWrite[n] = In(time.Millisecond, write)
	where := fmt.Sprintf("on %s (%s)", dir, FSType(dir))
	if err := b.setSample(fmt.Sprintf("scan_write_ms_%d", n), time.Millisecond, write, "median",
		fmt.Sprintf("drm.Discover of %d mixed fake GPUs + cdi.Writer.Sync into an empty dir (%d files, fsync'ed), %s", n, n+1, where)); err != nil {
		return err
	}
	return b.setSample(fmt.Sprintf("scan_resync_ms_%d", n), time.Millisecond, resync, "median",
		fmt.Sprintf("the same pass when nothing changed, with the write pass's Writer as the agent's periodic resync (compare, no write), %s", where))
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
