package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

func discoverCommand() *Command {
	return &Command{Name: "discover", Summary: "List the DRM cards and accel devices of this node", Run: runDiscover}
}

const discoverHelp = `Lists every DRM card (class/drm) and compute accelerator (class/accel, nodes
/dev/accel/accelN) found under the sysfs root, with its stable ID, driver,
class, PCI IDs, NUMA node and device nodes. Malformed entries, and
habanalabs' accel_controlD control nodes, are skipped with a warning on
stderr. With no DRM device, JSON and YAML print an empty list.`

// rootFlags are the discovery roots shared by discover and cdi generate.
type rootFlags struct{ sysfs, dev string }

func (r *rootFlags) register(f *flags) {
	f.StringVar(&r.sysfs, "sysfs-root", drm.DefaultRoots.Sysfs, "sysfs mount to read class/drm and class/accel from")
	f.StringVar(&r.dev, "dev-root", drm.DefaultRoots.Dev, "devfs mount holding dri/, accel/ and kfd")
}

func (r *rootFlags) roots() drm.Roots { return drm.Roots{Sysfs: r.sysfs, Dev: r.dev} }

// discoverCards runs discovery with the companions of cfg, and reports
// each skipped entry and each refused or missing companion on stderr.
func discoverCards(env *Env, roots drm.Roots, cfg *config.Config) ([]drm.Card, error) {
	inv, err := cfg.Discover(roots)
	if err != nil {
		return nil, err
	}
	// A node without DRM devices has a sysfs without class/drm; a sysfs
	// root that is not there at all is more likely a wrong flag.
	if _, err := os.Stat(roots.Sysfs); errors.Is(err, fs.ErrNotExist) {
		env.warnf("sysfs root %s does not exist", roots.Sysfs)
	}
	// Each error already reads "skip DRM entry <path>: <reason>".
	for _, s := range inv.Skipped {
		env.warnf("%v", s)
	}
	for _, e := range inv.Companions {
		env.warnf("%v", e)
	}
	return inv.Cards, nil
}

// cardView is the JSON/YAML shape of one discovered card. card and render
// are container paths; render is "" for a display-only card.
type cardView struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Driver      string     `json:"driver"`
	Bus         string     `json:"bus"`
	PCIAddress  string     `json:"pciAddress,omitempty"`
	VendorID    string     `json:"vendorID,omitempty"`
	DeviceID    string     `json:"deviceID,omitempty"`
	NUMANode    int        `json:"numaNode"`
	Class       string     `json:"class"`
	Card        string     `json:"card"`
	Render      string     `json:"render"`
	Accel       string     `json:"accel,omitempty"`
	DisplayOnly bool       `json:"displayOnly"`
	SysfsPath   string     `json:"sysfsPath"`
	Nodes       []nodeView `json:"nodes"`
}

// nodeView is one device node; mode is octal text ("0660").
type nodeView struct {
	Path     string `json:"path"`
	HostPath string `json:"hostPath"`
	Major    uint32 `json:"major"`
	Minor    uint32 `json:"minor"`
	Mode     string `json:"mode"`
	UID      uint32 `json:"uid"`
	GID      uint32 `json:"gid"`
}

func viewCard(c drm.Card) cardView {
	v := cardView{
		ID: c.ID, Name: c.Name, Driver: c.Driver, Bus: c.Bus, PCIAddress: c.PCIAddress,
		VendorID: c.VendorID, DeviceID: c.DeviceID, NUMANode: c.NUMANode,
		Class: c.Class(), Card: c.CardNode.Path, DisplayOnly: c.DisplayOnly(), SysfsPath: c.SysfsPath,
		Nodes: []nodeView{},
	}
	if c.RenderNode != nil {
		v.Render = c.RenderNode.Path
	}
	if c.AccelNode != nil {
		v.Accel = c.AccelNode.Path
	}
	for _, n := range c.Nodes() {
		v.Nodes = append(v.Nodes, nodeView{
			Path: n.Path, HostPath: n.HostPath, Major: n.Major, Minor: n.Minor,
			Mode: fmt.Sprintf("%04o", uint32(n.Mode.Perm())), UID: n.UID, GID: n.GID,
		})
	}
	return v
}

func runDiscover(_ context.Context, env *Env, args []string) error {
	f := newFlags("dri-cdi discover", "[flags]", discoverHelp)
	var roots rootFlags
	roots.register(f)
	output := f.output("table", "json", "yaml")
	f.finish()
	if err := f.parse(env, args, false); err != nil {
		return err
	}
	cards, err := discoverCards(env, roots.roots(), config.Default())
	if err != nil {
		return err
	}
	views := make([]cardView, 0, len(cards))
	for _, c := range cards {
		views = append(views, viewCard(c))
	}
	switch *output {
	case "json":
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(views)
	case "yaml":
		data, err := yaml.Marshal(views)
		if err != nil {
			return fmt.Errorf("encode YAML: %w", err)
		}
		_, err = env.Stdout.Write(data)
		return err
	}
	if len(views) == 0 {
		fmt.Fprintf(env.Stderr, "no DRM card or accel device found under %s or %s\n",
			filepath.Join(roots.sysfs, "class", drm.ClassDRM), filepath.Join(roots.sysfs, "class", drm.ClassAccel))
		return nil
	}
	return writeTable(env.Stdout, views)
}

func writeTable(w io.Writer, views []cardView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDRIVER\tBUS\tPCI ID\tNUMA\tCARD\tRENDER\tACCEL")
	for _, v := range views {
		pciID, numa, render := "-", "-", v.Render
		if v.VendorID != "" {
			pciID = v.VendorID + ":" + v.DeviceID
		}
		if v.NUMANode >= 0 {
			numa = fmt.Sprint(v.NUMANode)
		}
		if v.DisplayOnly {
			render = "- (display-only)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.ID, orDash(v.Driver), v.Bus, pciID, numa, orDash(v.Card), orDash(render), orDash(v.Accel))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
