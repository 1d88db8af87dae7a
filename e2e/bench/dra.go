package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/dra"
	"github.com/dri-cdi/dri-cdi/pkg/dra/dratest"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

const (
	draNode      = "bench-node"
	draNamespace = "bench-dra"
)

// draBinary runs bin/dri-cdi-dra on a fake tree of 16 mixed GPUs with a
// fake kubelet (registration as the kubelet's plugin watcher does it,
// then DRA gRPC calls on the plugin's socket) and a stub API server on
// loopback that answers the few requests the plugin makes (the Node,
// each claim's GET, and the ResourceSlice list, watch and writes). It
// measures NodePrepareResources, which includes the helper's GET of the
// claim and the checkpoint write, next to Allocate of the same run, and
// the plugin's RSS after that load. A second plugin, on the same tree
// with every card shared, measures the prepare of a share.
func (b *bench) draBinary() error {
	gpus := drmtest.Mixed(16)
	var cards []string
	drivers := map[string]bool{}
	for _, g := range gpus {
		cards = append(cards, g.ID())
		drivers[g.Driver] = true
	}
	excl, err := b.startDRA("dra", gpus, "")
	if err != nil {
		return err
	}
	defer excl.stop()
	config := fmt.Sprintf("pools:\n- resource: dri-cdi.dev/shared\n  drivers: [%s]\n  shares: %d\n",
		strings.Join(slices.Sorted(maps.Keys(drivers)), ", "), benchShares)
	shared, err := b.startDRA("dra-shared", gpus, config)
	if err != nil {
		return err
	}
	defer shared.stop()
	if err := b.measurePrepare(excl, shared, cards); err != nil {
		return err
	}
	rss, err := runningRSS(excl.proc)
	if err != nil {
		return err
	}
	return b.setRSS("dra_rss_mb", rss, "dri-cdi-dra (16 cards, one ResourceSlice, metrics server on) after the prepare load")
}

// draRun is one dri-cdi-dra of the bench, registered with the fake
// kubelet, and its stub API server.
type draRun struct {
	proc   *harness.Process
	plugin *dratest.Plugin
	api    *stubAPI
	log    string
}

func (r *draRun) stop() {
	r.plugin.Close()
	r.proc.Stop(syscall.SIGTERM, 10*time.Second)
	r.api.close()
}

// startDRA starts bin/dri-cdi-dra on a fake tree of gpus in b.tmp/name,
// with config as its config file ("" for none), and registers it.
func (b *bench) startDRA(name string, gpus []drmtest.GPU, config string) (_ *draRun, err error) {
	bin := filepath.Join(b.cfg.BinDir, "dri-cdi-dra")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w (run make build)", err)
	}
	dir := filepath.Join(b.tmp, name)
	tree, err := drmtest.NewTree(filepath.Join(dir, "tree"), gpus...)
	if err != nil {
		return nil, err
	}
	short, err := b.socketDir()
	if err != nil {
		return nil, err
	}
	reg, data := filepath.Join(short, "reg"), filepath.Join(short, "data")
	for _, d := range []string{reg, data} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, err
		}
	}
	api, err := startStubAPI()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			api.close()
		}
	}()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(api.kubeconfig()), 0o600); err != nil {
		return nil, err
	}
	roots := tree.Roots()
	argv := []string{bin, "--node-name=" + draNode, "--kubeconfig=" + kubeconfig,
		"--sysfs-root=" + roots.Sysfs, "--dev-root=" + roots.Dev, "--cdi-dir=" + filepath.Join(dir, "cdi"),
		"--registrar-dir=" + reg, "--plugin-data-dir=" + data, "--metrics-addr=127.0.0.1:0"}
	if config != "" {
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
			return nil, err
		}
		argv = append(argv, "--config="+path)
	}
	log := filepath.Join(dir, "dra.log")
	proc, err := startProcess("dri-cdi-dra", log, argv...)
	if err != nil {
		return nil, err
	}
	b.track(proc)
	defer func() {
		if err != nil {
			proc.Stop(syscall.SIGTERM, 10*time.Second)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sock, err := dratest.WaitSocket(ctx, reg)
	if err != nil {
		if !proc.Running() {
			return nil, proc.Exited()
		}
		return nil, err
	}
	p, err := dratest.Register(ctx, sock, "")
	if err != nil {
		return nil, err
	}
	return &draRun{proc: proc, plugin: p, api: api, log: log}, nil
}

// benchShares is the shares of every card of the shared plugin.
const benchShares = 4

// prepareArm is one plugin of the prepare comparison and how its claims
// are allocated.
type prepareArm struct {
	run *draRun
	// add stores claim name/uid for device in the arm's stub API server.
	add func(name, uid, device string)
	ds  []time.Duration
}

// measurePrepare prepares one claim for one card per call, as the
// kubelet does at pod start, rotating over the cards, and unprepares it
// (untimed) so that the card is free again, on two plugins side by
// side in ABBA blocks: excl publishes the cards exclusively, shared with
// benchShares shares each, of which all but one are held by claims
// prepared first (so that prepare counts them against the capacity, as
// on a busy shared card). It sets dra_prepare_p99_us,
// dra_prepare_shared_p99_us, their ratio and, when this run measured
// Allocate, dra_prepare_vs_allocate_ratio.
func (b *bench) measurePrepare(excl, shared *draRun, cards []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addShare := func(name, uid, device string) { shared.api.addShare(name, uid, device, "share-"+uid) }
	for i, card := range cards {
		for s := range benchShares - 1 {
			name, uid := fmt.Sprintf("held-%d-%d", i, s), fmt.Sprintf("uid-held-%d-%d", i, s)
			addShare(name, uid, dra.DeviceName(card))
			resp, err := shared.plugin.Prepare(ctx, dratest.Claim(draNamespace, name, uid))
			if err == nil {
				err = checkPrepare(resp.GetClaims()[uid], card)
			}
			if err != nil {
				return fmt.Errorf("prepare held share %s of card %s: %w; last lines of dri-cdi-dra's log:\n%s", name, card, err, tail(shared.log, 20))
			}
		}
	}
	arms := [2]*prepareArm{{run: excl, add: excl.api.addClaim}, {run: shared, add: addShare}}
	// Each call also writes the checkpoint twice (prepare, unprepare),
	// so a tenth of Allocate's calls per arm.
	calls := max(b.cfg.allocateCalls/10, 100)
	const block = 10
	runtime.GC()
	// Blocks of the two arms in ABBA order, each arm's block the same
	// claims' numbers, so that the arms see the same cards in turn.
	for bi := range 2 * ((calls + calls/10 + block - 1) / block) {
		arm := arms[1]
		if abbaA(bi) {
			arm = arms[0]
		}
		for k := bi / 2 * block; k < (bi/2+1)*block; k++ {
			card := cards[k%len(cards)]
			name, uid := fmt.Sprintf("c%d", k), fmt.Sprintf("uid-%d", k)
			arm.add(name, uid, dra.DeviceName(card))
			claim := dratest.Claim(draNamespace, name, uid)
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			start := time.Now()
			resp, err := arm.run.plugin.Prepare(cctx, claim)
			d := time.Since(start)
			if err == nil {
				err = checkPrepare(resp.GetClaims()[uid], card)
			}
			if err == nil {
				_, err = arm.run.plugin.Unprepare(cctx, claim)
			}
			cancel()
			if err != nil {
				return fmt.Errorf("prepare claim %s for card %s: %w; last lines of dri-cdi-dra's log:\n%s", name, card, err, tail(arm.run.log, 20))
			}
			if k >= calls/10 {
				arm.ds = append(arm.ds, d)
			}
		}
	}
	if err := b.setSample("dra_prepare_p99_us", time.Microsecond, arms[0].ds, "p99",
		fmt.Sprintf("NodePrepareResources of 1 claim with 1 of %d cards over the plugin's DRA socket (gRPC, unix), including the helper's GET of the claim from a loopback stub API server and the checkpoint write", len(cards))); err != nil {
		return err
	}
	if err := b.setSample("dra_prepare_shared_p99_us", time.Microsecond, arms[1].ds, "p99",
		fmt.Sprintf("as dra_prepare_p99_us, 1 share of 1 of %d cards of %d shares, %d of them held by other claims; in ABBA blocks of %d with it", len(cards), benchShares, benchShares-1, block)); err != nil {
		return err
	}
	prep, _ := b.report.Get("dra_prepare_p99_us")
	sh, _ := b.report.Get("dra_prepare_shared_p99_us")
	b.report.Set("dra_prepare_shared_vs_exclusive_ratio", Result{Value: sh.Value / prep.Value,
		Note: fmt.Sprintf("dra_prepare_shared_p99_us / dra_prepare_p99_us of this run (%.0f / %.0f us)", sh.Value, prep.Value)})
	logf("dra_prepare_shared_vs_exclusive_ratio = %.3g", sh.Value/prep.Value)
	alloc, ok := b.report.Get("allocate_p99_us")
	if !ok || alloc.Value <= 0 {
		return errors.New("dra_prepare_vs_allocate_ratio: allocate_p99_us was not measured in this run")
	}
	b.report.Set("dra_prepare_vs_allocate_ratio", Result{Value: prep.Value / alloc.Value,
		Note: fmt.Sprintf("dra_prepare_p99_us / allocate_p99_us of this run (%.0f / %.0f us)", prep.Value, alloc.Value)})
	logf("dra_prepare_vs_allocate_ratio = %.3g", prep.Value/alloc.Value)
	return nil
}

func checkPrepare(r *drapb.NodePrepareResourceResponse, card string) error {
	if r == nil {
		return errors.New("no answer for the claim")
	}
	if r.GetError() != "" {
		return errors.New(r.GetError())
	}
	want := cdi.QualifiedName(cdi.DefaultKind, card)
	if len(r.GetDevices()) != 1 || len(r.GetDevices()[0].GetCdiDeviceIds()) != 1 || r.GetDevices()[0].GetCdiDeviceIds()[0] != want {
		return fmt.Errorf("devices %v, want CDI device %s", r.GetDevices(), want)
	}
	return nil
}

// stubAPI is the part of the API server the plugin uses, on loopback:
// GET of the Node and of claims (JSON), and a ResourceSlice collection
// that accepts writes and keeps watches open. It is not a fake of the
// API server's semantics: it lets the plugin's helper do its real
// requests so that their cost is in the sample.
type stubAPI struct {
	srv *http.Server
	ln  net.Listener

	mu     sync.Mutex
	claims map[string]map[string]any
	// slices are the ResourceSlices written, by name, for lists (the
	// plugin reads a slice with shared cards back).
	slices map[string]map[string]any
}

func startStubAPI() (*stubAPI, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &stubAPI{ln: ln, claims: map[string]map[string]any{}, slices: map[string]map[string]any{}}
	a.srv = &http.Server{Handler: http.HandlerFunc(a.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

func (a *stubAPI) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = a.srv.Shutdown(ctx)
	_ = a.srv.Close()
}

func (a *stubAPI) kubeconfig() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: stub, cluster: {server: "http://%s"}}]
users: [{name: stub, user: {}}]
contexts: [{name: stub, context: {cluster: stub, user: stub}}]
current-context: stub
`, a.ln.Addr())
}

// addClaim stores an allocated claim for one device of this node's pool.
func (a *stubAPI) addClaim(name, uid, device string) {
	a.add(name, uid, map[string]any{"request": "gpu", "driver": dra.DriverName, "pool": draNode, "device": device})
}

// addShare stores an allocated claim for one share of a shared device,
// as the scheduler records it.
func (a *stubAPI) addShare(name, uid, device, shareID string) {
	a.add(name, uid, map[string]any{"request": "gpu", "driver": dra.DriverName, "pool": draNode, "device": device,
		"shareID": shareID, "consumedCapacity": map[string]any{string(dra.CapacityShares): "1"}})
}

func (a *stubAPI) add(name, uid string, result map[string]any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.claims[name] = map[string]any{
		"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
		"metadata": map[string]any{"namespace": draNamespace, "name": name, "uid": uid, "resourceVersion": "1"},
		"status":   map[string]any{"allocation": map[string]any{"devices": map[string]any{"results": []any{result}}}},
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (a *stubAPI) serve(w http.ResponseWriter, r *http.Request) {
	if os.Getenv("DRA_STUB_TRACE") != "" {
		logf("stub API: %s %s", r.Method, r.URL)
	}
	const slicesPath = "/apis/resource.k8s.io/v1/resourceslices"
	claims := "/apis/resource.k8s.io/v1/namespaces/" + draNamespace + "/resourceclaims/"
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes/"+draNode:
		writeJSON(w, http.StatusOK, map[string]any{"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": draNode, "uid": "bench-node-uid", "resourceVersion": "1"}})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, claims):
		a.mu.Lock()
		c, ok := a.claims[strings.TrimPrefix(r.URL.Path, claims)]
		a.mu.Unlock()
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{"apiVersion": "v1", "kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404})
			return
		}
		writeJSON(w, http.StatusOK, c)
	case r.Method == http.MethodGet && r.URL.Path == slicesPath && r.URL.Query().Get("watch") == "true":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		<-r.Context().Done()
	case r.Method == http.MethodGet && r.URL.Path == slicesPath:
		a.mu.Lock()
		items := make([]any, 0, len(a.slices))
		for _, name := range slices.Sorted(maps.Keys(a.slices)) {
			items = append(items, a.slices[name])
		}
		a.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList",
			"metadata": map[string]any{"resourceVersion": "1"}, "items": items})
	case (r.Method == http.MethodPost && r.URL.Path == slicesPath) || (r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, slicesPath+"/")):
		var obj map[string]any
		if err := json.NewDecoder(r.Body).Decode(&obj); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"kind": "Status", "status": "Failure", "message": err.Error(), "code": 400})
			return
		}
		if md, ok := obj["metadata"].(map[string]any); ok {
			if md["name"] == nil || md["name"] == "" {
				md["name"], _ = md["generateName"].(string)
				md["name"] = md["name"].(string) + "x"
			}
			md["resourceVersion"], md["uid"] = "2", "slice-uid"
			a.mu.Lock()
			a.slices[fmt.Sprint(md["name"])] = obj
			a.mu.Unlock()
		}
		writeJSON(w, map[bool]int{true: http.StatusCreated, false: http.StatusOK}[r.Method == http.MethodPost], obj)
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"apiVersion": "v1", "kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404,
			"message": r.Method + " " + r.URL.Path + " is not served by the bench's stub API server"})
	}
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
