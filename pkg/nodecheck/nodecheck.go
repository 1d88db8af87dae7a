// Package nodecheck serves, on a daemon's metrics server, the doctor
// checks that the daemon can make from inside its own container, so that
// an operator can check a node through the API server without a
// privileged debug pod (which the policies that reject privileged pods
// also reject).
//
// # What it serves
//
// GET /doctor answers the doctor's text report; /doctor?format=json the
// JSON report (pkg/doctor.Report, with its scope and what it did not
// check). dri-cdi-agent checks the DRM cards it discovers, its CDI specs
// and the kubelet's device plugin socket; dri-cdi-nri checks its CDI
// specs, the kubelet's PodResources socket and the NRI socket.
//
// # What it never serves
//
// The containerd config: neither container mounts it, and a report served
// on a port that the cluster's pods can reach must not carry a file that
// can hold registry credentials. The checks of the config (CDI on, the
// spec dir listed, NRI on, the delivery mode the runtime supports) stay
// with `dri-cdi doctor` on the node.
//
// A report is computed at most once per ReuseFor; requests in between get
// the same report, so the endpoint cannot be used to keep the node busy.
package nodecheck

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/doctor"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// Path is where Mount serves the report.
const Path = "/doctor"

// ReuseFor is how long a report is served again before the checks run
// anew.
const ReuseFor = 5 * time.Second

// checkTimeout bounds one run of the checks.
const checkTimeout = 10 * time.Second

// What the daemons cannot see from their containers, for the report.
const (
	notContainerd = "the containerd config (CDI on, cdi_spec_dirs, NRI on) and so the delivery mode the runtime supports: " +
		"the pod does not mount it, on purpose, as it can hold registry credentials; run `dri-cdi doctor` on the node"
	notCgroupDRA = "the cgroup version and the kubelet's plugin registration directory (device plugin and DRA on one node): run `dri-cdi doctor` on the node"
)

// Handler serves one daemon's report.
type Handler struct {
	opts  doctor.Options
	scope doctor.Scope
	now   func() time.Time

	mu   sync.Mutex
	last *doctor.Report
	at   time.Time
}

// New returns a Handler that runs scope's checks with opts.
func New(opts doctor.Options, scope doctor.Scope) *Handler {
	// The served report never reads the containerd config; clear it so
	// that no later change to the checks could start reading it here.
	opts.ContainerdConfig = ""
	return &Handler{opts: opts, scope: scope, now: time.Now}
}

// Agent is the Handler of dri-cdi-agent: the cards it discovers from
// roots, its CDI specs of kind in cdiDir, and, when devicePlugin is true
// (not in DRA mode), the kubelet's device plugin socket in kubeletDir.
func Agent(roots drm.Roots, cdiDir, kind, kubeletDir string, devicePlugin bool) *Handler {
	opts := doctor.DefaultOptions()
	opts.SysfsRoot, opts.DevRoot, opts.CDIDir, opts.CDIKind, opts.KubeletDir = roots.Sysfs, roots.Dev, cdiDir, kind, kubeletDir
	return New(opts, doctor.Scope{
		Name:          "dri-cdi-agent",
		DevicePlugins: devicePlugin,
		Devices:       true,
		CDISpecs:      true,
		NotChecked: []string{notContainerd, notCgroupDRA,
			"the kubelet's PodResources socket and the NRI socket: dri-cdi-nri serves those checks on its own port"},
	})
}

// NRI is the Handler of dri-cdi-nri: its CDI specs of kind in cdiDir
// (their device nodes against /dev), the PodResources socket and the NRI
// socket.
func NRI(cdiDir, kind, podResourcesSocket, nriSocket string) *Handler {
	opts := doctor.DefaultOptions()
	opts.CDIDir, opts.CDIKind, opts.PodResourcesSocket, opts.NRISocket = cdiDir, kind, podResourcesSocket, nriSocket
	return New(opts, doctor.Scope{
		Name:         "dri-cdi-nri",
		PodResources: true,
		NRISocket:    true,
		CDISpecs:     true,
		NotChecked: []string{notContainerd, notCgroupDRA,
			"the DRM cards and the kubelet's device plugin socket: dri-cdi-agent serves those checks on its own port"},
	})
}

// Mount returns a handler that serves h at Path and everything else from
// next (the metrics server's /metrics, /healthz and /readyz).
func Mount(next http.Handler, h *Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(Path, h)
	mux.Handle("/", next)
	return mux
}

// ServeHTTP answers GET and HEAD with the report, as text or, with
// ?format=json, as JSON.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method "+r.Method+" not allowed: use GET", http.StatusMethodNotAllowed)
		return
	}
	format := r.URL.Query().Get("format")
	switch format {
	case "", "text":
		format = "text"
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	case "json":
		w.Header().Set("Content-Type", "application/json")
	default:
		http.Error(w, "invalid format "+format+": want text or json", http.StatusBadRequest)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	rep, err := h.report(r.Context())
	if err != nil {
		http.Error(w, "doctor: "+err.Error(), http.StatusInternalServerError)
		return
	}
	_ = rep.Write(w, format)
}

// report returns the last report while it is younger than ReuseFor, and
// otherwise runs the checks; concurrent callers wait for one run.
func (h *Handler) report(ctx context.Context) (*doctor.Report, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last != nil && h.now().Sub(h.at) < ReuseFor {
		return h.last, nil
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	rep, err := doctor.CheckScope(ctx, h.opts, h.scope)
	if err != nil {
		return nil, err
	}
	h.last, h.at = rep, h.now()
	return rep, nil
}
