package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/dpapi"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
)

// Status is the outcome of one check.
type Status string

// The outcomes, from good to bad.
const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Delivery modes of the agent (its --delivery flag), as the plain strings
// of Options and Report. pkg/deviceplugin owns the names.
const (
	DeliveryCDICRI      = string(dpapi.DeliveryCDICRI)
	DeliveryNRI         = string(dpapi.DeliveryNRI)
	DeliveryDeviceSpecs = string(dpapi.DeliveryDeviceSpecs)
)

// Result is one check's outcome.
type Result struct {
	// Name identifies the check, e.g. "containerd.cdi".
	Name string `json:"name"`
	// Status is OK, WARN or FAIL.
	Status Status `json:"status"`
	// Message says what was found.
	Message string `json:"message"`
	// Fix says what to do about a WARN or FAIL.
	Fix string `json:"fix,omitempty"`
}

// Report is the outcome of every check.
type Report struct {
	Results []Result `json:"results"`
	// Delivery is the delivery mode the report was made for.
	Delivery string `json:"delivery"`
	// Recommended is the delivery mode this node's runtime supports best.
	Recommended string `json:"recommendedDelivery"`
	// Failed is true when any check failed.
	Failed bool `json:"failed"`
	// Scope, when set, says that only some checks ran and from where
	// (CheckScope); NotChecked then lists what this place cannot see.
	Scope      string   `json:"scope,omitempty"`
	NotChecked []string `json:"notChecked,omitempty"`
}

// Options are the paths and settings the checks use.
type Options struct {
	// Root is where the host's filesystem is, "/" or "" on the host itself
	// (e.g. /host in a debug pod that mounts it there). Every other path
	// is a host path, looked up under Root.
	Root string
	// ContainerdConfig is containerd's config file. Empty means the first
	// of DefaultContainerdConfigs that exists.
	ContainerdConfig string
	// ContainerdVersion is the containerd version ("2.4.2", "v1.7.27"),
	// when known; some settings mean different things across versions.
	ContainerdVersion string
	// CDIDir is where the agent writes the CDI specs.
	CDIDir string
	// CDIKind is the CDI kind of our devices.
	CDIKind string
	// KubeletDir is the kubelet's device plugin directory.
	KubeletDir string
	// PluginsRegistryDir is the kubelet's plugin registration directory,
	// where a DRA driver registers.
	PluginsRegistryDir string
	// PodResourcesSocket is the kubelet's PodResources socket.
	PodResourcesSocket string
	// NRISocket is the NRI socket the plugin dials.
	NRISocket string
	// SysfsRoot and DevRoot stand for /sys and /dev.
	SysfsRoot, DevRoot string
	// Delivery is the agent's delivery mode: cdi-cri, nri or device-specs.
	Delivery string
}

// DefaultContainerdConfigs are the config files looked for when
// Options.ContainerdConfig is empty: containerd's own, then k3s's and
// RKE2's generated files.
var DefaultContainerdConfigs = []string{
	"/etc/containerd/config.toml",
	"/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
	"/var/lib/rancher/rke2/agent/etc/containerd/config.toml",
}

// DefaultNRISocket is containerd's default NRI socket, what
// nri.DefaultSocket is. It is written out rather than taken from NRI's
// api package, which would link a WASM runtime into every daemon that
// serves the doctor's checks (pkg/nodecheck); a test keeps them equal.
const DefaultNRISocket = "/var/run/nri/nri.sock"

// DefaultOptions are the paths of a standard node, matching the defaults
// of dri-cdi-agent and dri-cdi-nri.
func DefaultOptions() Options {
	return Options{
		Root:               "/",
		CDIDir:             cdi.DefaultDir,
		CDIKind:            cdi.DefaultKind,
		KubeletDir:         dpapi.DefaultKubeletDir,
		PluginsRegistryDir: config.DRARegistrarDir,
		PodResourcesSocket: podresources.DefaultSocket,
		NRISocket:          DefaultNRISocket,
		SysfsRoot:          drm.DefaultRoots.Sysfs,
		DevRoot:            drm.DefaultRoots.Dev,
		Delivery:           DeliveryCDICRI,
	}
}

// Check is the doctor: it runs every check and returns the report. It
// never writes to the node; its only error is about opts themselves (an
// unknown delivery mode), not about the node, whose faults are results.
func Check(ctx context.Context, opts Options) (*Report, error) {
	if _, err := dpapi.ParseDelivery(opts.Delivery); err != nil {
		return nil, err
	}
	d := &doctor{opts: opts, ctx: ctx, root: newHostRoot(opts.Root)}
	return d.run(), nil
}

// Write writes the report to w in format, "text" or "json".
func (r *Report) Write(w io.Writer, format string) error {
	switch format {
	case "text":
		return r.WriteText(w)
	case "json":
		return r.WriteJSON(w)
	}
	return fmt.Errorf("invalid output format %q: want text or json", format)
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes one line per check, with its fix indented below it.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, res := range r.Results {
		fmt.Fprintf(&b, "%-4s  %-26s %s\n", res.Status, res.Name, res.Message)
		if res.Fix != "" {
			for _, l := range strings.Split(res.Fix, "\n") {
				fmt.Fprintf(&b, "      %-26s fix: %s\n", "", l)
			}
		}
	}
	counts := map[Status]int{}
	for _, res := range r.Results {
		counts[res.Status]++
	}
	if r.Scope != "" {
		fmt.Fprintf(&b, "\n%d OK, %d WARN, %d FAIL; %s\n", counts[OK], counts[Warn], counts[Fail], r.Scope)
		for _, n := range r.NotChecked {
			fmt.Fprintf(&b, "not checked: %s\n", n)
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "\n%d OK, %d WARN, %d FAIL; delivery %s, recommended %s\n",
		counts[OK], counts[Warn], counts[Fail], r.Delivery, r.Recommended)
	_, err := io.WriteString(w, b.String())
	return err
}

type doctor struct {
	ctx  context.Context
	opts Options
	rep  Report
	// root resolves host paths inside opts.Root (hostroot.go).
	root hostRoot
	// unresolved are the host paths already reported as unresolvable.
	unresolved map[string]bool
}

func (d *doctor) add(name string, s Status, msg, fix string) {
	d.rep.Results = append(d.rep.Results, Result{Name: name, Status: s, Message: msg, Fix: fix})
	if s == Fail {
		d.rep.Failed = true
	}
}

func (d *doctor) run() *Report {
	d.rep.Delivery = d.opts.Delivery
	rt := d.checkContainerd()
	d.checkKubelet()
	d.checkDRA()
	d.checkCgroup()
	cards := d.checkDevices()
	d.checkMemoryLimits(cards)
	d.checkSpecs(cards)
	d.advise(rt)
	return &d.rep
}
