package nri

import (
	"fmt"
	"os"
	"path"

	"github.com/containerd/nri/pkg/api"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// defaultMode is used for a node whose host mode is unknown: what the
// host's DRM nodes normally have.
const defaultMode os.FileMode = 0o660

// DeviceSource gives the device nodes of a card, from our CDI specs.
// Nodes must not do I/O: it is called while the runtime waits.
type DeviceSource interface {
	Nodes(cardID string) ([]drm.DeviceNode, bool)
}

// deviceAdjustment returns the adjustment that gives container c every
// node of cards it does not have yet, and the container paths it adds. A
// node already present with the same type and numbers (the runtime's CDI
// injection ran first) is skipped; with other numbers it is an error
// wrapping ErrDeviceConflict. A card the source does not know is an error
// wrapping ErrUnknownCard. With nothing to add, the adjustment is nil.
func deviceAdjustment(c *api.Container, cards []string, src DeviceSource) (*api.ContainerAdjustment, []string, error) {
	present := map[string]*api.LinuxDevice{}
	for _, d := range c.GetLinux().GetDevices() {
		present[d.GetPath()] = d
	}
	var (
		adj   *api.ContainerAdjustment
		added []string
	)
	for _, card := range cards {
		nodes, ok := src.Nodes(card)
		if !ok || len(nodes) == 0 {
			return nil, nil, fmt.Errorf("%w: card %s", ErrUnknownCard, card)
		}
		for _, n := range nodes {
			p := path.Clean(n.Path)
			if d, ok := present[p]; ok {
				if isChar(d.GetType()) && d.GetMajor() == int64(n.Major) && d.GetMinor() == int64(n.Minor) {
					continue
				}
				return nil, nil, fmt.Errorf("%w: card %s needs %s as char device %d:%d, but the container already has %s %s %d:%d there",
					ErrDeviceConflict, card, p, n.Major, n.Minor, deviceKind(d.GetType()), p, d.GetMajor(), d.GetMinor())
			}
			dev := linuxDevice(p, n, c.GetUser())
			present[p] = dev
			if adj == nil {
				adj = &api.ContainerAdjustment{}
			}
			adj.AddDevice(dev)
			added = append(added, p)
		}
	}
	return adj, added, nil
}

func isChar(t string) bool { return t == "c" || t == "u" }

func deviceKind(t string) string {
	switch t {
	case "c", "u":
		return "char device"
	case "b":
		return "block device"
	case "p":
		return "fifo"
	}
	return "device of type " + fmt.Sprintf("%q", t)
}

// linuxDevice describes node n at container path p, owned for user u.
// The api's optional-value helpers take typed values only; an untyped
// constant would silently give nil, so every value is converted first.
func linuxDevice(p string, n drm.DeviceNode, u *api.User) *api.LinuxDevice {
	mode := n.Mode.Perm()
	if mode == 0 {
		mode = defaultMode
	}
	uid, gid := owner(n, u)
	return &api.LinuxDevice{
		Path:     p,
		Type:     "c",
		Major:    int64(n.Major),
		Minor:    int64(n.Minor),
		FileMode: api.FileMode(os.FileMode(mode)),
		Uid:      api.UInt32(uint32(uid)),
		Gid:      api.UInt32(uint32(gid)),
	}
}

// owner returns who owns a node in the container: exactly what the CDI
// library's (*ContainerEdits).Apply gives for the spec the agent writes
// (docs/architecture.md, "Device ownership"), so that cdi-cri and nri
// agree for every user. The spec carries the host node's gid when it is
// not 0 and leaves uid open; Apply keeps a gid the spec sets and fills
// the process's uid and gid only when they are not 0 (an unset value is 0
// for runc). So: uid is the process's uid; gid is the host node's gid when
// not 0, else the process's gid. gid 0 thus appears only for a process
// that already runs with gid 0 on a root-owned host node, and no group is
// ever added to the process.
func owner(n drm.DeviceNode, u *api.User) (uid, gid uint32) {
	uid, gid = u.GetUid(), n.GID
	if gid == 0 {
		gid = u.GetGid()
	}
	return uid, gid
}
