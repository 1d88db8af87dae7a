package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dri-cdi/dri-cdi/cdi"
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
// the plugin's RSS after that load.
func (b *bench) draBinary() error {
	bin := filepath.Join(b.cfg.BinDir, "dri-cdi-dra")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w (run make build)", err)
	}
	dir := filepath.Join(b.tmp, "dra")
	gpus := drmtest.Mixed(16)
	tree, err := drmtest.NewTree(filepath.Join(dir, "tree"), gpus...)
	if err != nil {
		return err
	}
	short, err := b.socketDir()
	if err != nil {
		return err
	}
	reg, data := filepath.Join(short, "reg"), filepath.Join(short, "data")
	for _, d := range []string{reg, data} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
	}
	api, err := startStubAPI()
	if err != nil {
		return err
	}
	defer api.close()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(api.kubeconfig()), 0o600); err != nil {
		return err
	}
	roots := tree.Roots()
	plugin, err := startProcess("dri-cdi-dra", filepath.Join(dir, "dra.log"), bin,
		"--node-name="+draNode, "--kubeconfig="+kubeconfig,
		"--sysfs-root="+roots.Sysfs, "--dev-root="+roots.Dev, "--cdi-dir="+filepath.Join(dir, "cdi"),
		"--registrar-dir="+reg, "--plugin-data-dir="+data, "--metrics-addr=127.0.0.1:0")
	if err != nil {
		return err
	}
	b.track(plugin)
	defer plugin.Stop(syscall.SIGTERM, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sock, err := dratest.WaitSocket(ctx, reg)
	if err != nil {
		if !plugin.Running() {
			return plugin.Exited()
		}
		return err
	}
	p, err := dratest.Register(ctx, sock, "")
	if err != nil {
		return err
	}
	defer p.Close()

	var cards []string
	for _, g := range gpus {
		cards = append(cards, g.ID())
	}
	if err := b.measurePrepare(p, api, cards); err != nil {
		return fmt.Errorf("%w; last lines of dri-cdi-dra's log:\n%s", err, tail(filepath.Join(dir, "dra.log"), 20))
	}
	rss, err := runningRSS(plugin)
	if err != nil {
		return err
	}
	return b.setRSS("dra_rss_mb", rss, "dri-cdi-dra (16 cards, one ResourceSlice, metrics server on) after the prepare load")
}

// measurePrepare prepares one claim for one card per call, as the
// kubelet does at pod start, rotating over the cards, and unprepares it
// (untimed) so that the card is free again; then it sets
// dra_prepare_p99_us and, when this run measured Allocate, the ratio.
func (b *bench) measurePrepare(p *dratest.Plugin, api *stubAPI, cards []string) error {
	// Each call also writes the checkpoint twice (prepare, unprepare),
	// so a tenth of Allocate's calls.
	calls := max(b.cfg.allocateCalls/10, 100)
	ds := make([]time.Duration, 0, calls)
	runtime.GC()
	for i := range calls + calls/10 {
		card := cards[i%len(cards)]
		name, uid := fmt.Sprintf("c%d", i), fmt.Sprintf("uid-%d", i)
		api.addClaim(name, uid, dra.DeviceName(card))
		claim := dratest.Claim(draNamespace, name, uid)
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		resp, err := p.Prepare(cctx, claim)
		d := time.Since(start)
		if err == nil {
			err = checkPrepare(resp.GetClaims()[uid], card)
		}
		if err == nil {
			_, err = p.Unprepare(cctx, claim)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("prepare claim %s for card %s: %w", name, card, err)
		}
		if i >= calls/10 {
			ds = append(ds, d)
		}
	}
	if err := b.setSample("dra_prepare_p99_us", time.Microsecond, ds, "p99",
		fmt.Sprintf("NodePrepareResources of 1 claim with 1 of %d cards over the plugin's DRA socket (gRPC, unix), including the helper's GET of the claim from a loopback stub API server and the checkpoint write", len(cards))); err != nil {
		return err
	}
	prep, ok1 := b.report.Get("dra_prepare_p99_us")
	alloc, ok2 := b.report.Get("allocate_p99_us")
	if !ok1 || !ok2 || alloc.Value <= 0 {
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
}

func startStubAPI() (*stubAPI, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	a := &stubAPI{ln: ln, claims: map[string]map[string]any{}}
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
	a.mu.Lock()
	defer a.mu.Unlock()
	a.claims[name] = map[string]any{
		"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
		"metadata": map[string]any{"namespace": draNamespace, "name": name, "uid": uid, "resourceVersion": "1"},
		"status": map[string]any{"allocation": map[string]any{"devices": map[string]any{"results": []any{
			map[string]any{"request": "gpu", "driver": dra.DriverName, "pool": draNode, "device": device},
		}}}},
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
	const slices = "/apis/resource.k8s.io/v1/resourceslices"
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
	case r.Method == http.MethodGet && r.URL.Path == slices && r.URL.Query().Get("watch") == "true":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		<-r.Context().Done()
	case r.Method == http.MethodGet && r.URL.Path == slices:
		writeJSON(w, http.StatusOK, map[string]any{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList",
			"metadata": map[string]any{"resourceVersion": "1"}, "items": []any{}})
	case (r.Method == http.MethodPost && r.URL.Path == slices) || (r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, slices+"/")):
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
