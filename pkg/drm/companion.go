package drm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Companion asks for device nodes that go with a card: a SoC's video
// codec, a media controller, DMA heaps, AMD's /dev/kfd. Exactly one of
// Subsystem and Path is set.
type Companion struct {
	// Subsystem takes every node of this kernel subsystem (a class in
	// <sysfs>/class) that is tied to the card: its sysfs device is the
	// card's parent device or below it, on the same PCI device (another
	// function of the card's slot), or, for a platform card, below the
	// same SoC bus node as the card.
	Subsystem string `json:"subsystem,omitempty"`
	// Path is a node, or a glob of nodes, under /dev, for nodes that
	// belong to no device in sysfs (/dev/dma_heap/*, /dev/kfd).
	Path string `json:"path,omitempty"`
}

// String names the companion as errors do: "/dev/dma_heap/*" or
// "subsystem video4linux".
func (c Companion) String() string {
	if c.Subsystem != "" {
		return "subsystem " + c.Subsystem
	}
	return c.Path
}

// CompanionSubsystems are the kernel subsystems a companion node may
// belong to: V4L2 video and codec nodes, media controllers, DMA-BUF
// heaps, and AMD's compute node. Anything else (sg, bsg, nvme-generic,
// mtd, msr, kvm, vfio, uinput, fuse, ...) is refused: an allowlist, not a
// denylist.
var CompanionSubsystems = []string{"video4linux", "media", "dma_heap", "kfd"}

// CompanionMisc are the misc devices (subsystem misc) that are vendor
// media blocks and may be companions by name: Rockchip's RGA and MPP
// service, and the Mali kbase node of vendor kernels. No other misc
// device is (misc also holds fuse, uinput, kvm, ...).
var CompanionMisc = []string{"rga", "mpp_service", "mali0"}

// DefaultCompanions are the companions every card of a driver gets, in
// any pool: amdgpu's compute node, which ROCm opens next to the render
// node.
var DefaultCompanions = map[string][]Companion{
	"amdgpu": {{Path: "/dev/kfd"}},
}

var (
	// ErrCompanionRefused: a companion node is not of an allowed
	// subsystem, is a DRM or accel node, or its kind cannot be told.
	ErrCompanionRefused = errors.New("companion refused")
	// ErrCompanionMissing: no node matches a companion.
	ErrCompanionMissing = errors.New("companion missing")
)

// Validate checks the form of c: one of Subsystem and Path; a subsystem
// of CompanionSubsystems (or misc); a clean absolute path or glob under
// /dev, outside /dev/dri and /dev/accel, which hold cards' own nodes.
func (c Companion) Validate() error {
	switch {
	case (c.Subsystem == "") == (c.Path == ""):
		return errors.New("set exactly one of subsystem and path")
	case c.Subsystem != "":
		if c.Subsystem == ClassDRM || c.Subsystem == ClassAccel {
			return fmt.Errorf("subsystem %q: another card's node is never a companion", c.Subsystem)
		}
		if !slices.Contains(CompanionSubsystems, c.Subsystem) && c.Subsystem != "misc" {
			return fmt.Errorf("subsystem %q is not one of %s, misc", c.Subsystem, strings.Join(CompanionSubsystems, ", "))
		}
		return nil
	}
	p := c.Path
	if !strings.HasPrefix(p, "/dev/") || path.Clean(p) != p {
		return fmt.Errorf("path %q is not a clean absolute path under /dev", p)
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("path %q: %w", p, err)
	}
	for _, dir := range []string{"/dev/dri", "/dev/" + ClassAccel} {
		if p == dir || strings.HasPrefix(p, dir+"/") || strings.HasPrefix(dir, strings.TrimRight(p, "*")) && strings.ContainsAny(p, "*?[") {
			return fmt.Errorf("path %q: %s holds cards' own nodes, never companions", p, dir)
		}
	}
	return nil
}

// Companions resolves comps for card under roots: the nodes found,
// sorted by container path, each once, and one error per companion that
// is refused (ErrCompanionRefused) or matches nothing
// (ErrCompanionMissing), naming the companion, the node and the reason.
// A refused node is left out; the others are kept.
func Companions(roots Roots, card *Card, comps []Companion) ([]DeviceNode, []error) {
	var nodes []DeviceNode
	var errs []error
	seen := map[string]bool{}
	for _, c := range comps {
		var found []DeviceNode
		var err error
		if c.Subsystem != "" {
			found, err = tiedNodes(roots, card, c.Subsystem)
		} else {
			found, err = pathNodes(roots, c.Path)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("companion %s of card %s: %w", c, card.ID, err))
		}
		for _, n := range found {
			if !seen[n.Path] {
				seen[n.Path] = true
				nodes = append(nodes, n)
			}
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Path < nodes[j].Path })
	return nodes, errs
}

// pathNodes are the nodes matching pattern (under /dev) under roots.Dev,
// each checked against the kernel's record of its number.
func pathNodes(roots Roots, pattern string) ([]DeviceNode, error) {
	host := filepath.Join(roots.Dev, strings.TrimPrefix(pattern, "/dev/"))
	matches, err := filepath.Glob(host)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCompanionRefused, err)
	}
	if len(matches) == 0 {
		return nil, fmt.Errorf("%w: no node matches %s", ErrCompanionMissing, host)
	}
	var nodes []DeviceNode
	var errs []error
	for _, m := range matches {
		n, err := statChar(m)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrCompanionRefused, err))
			continue
		}
		rel, _ := filepath.Rel(roots.Dev, m)
		n.Path = "/dev/" + filepath.ToSlash(rel)
		if err := allowedChar(roots.Sysfs, n); err != nil {
			errs = append(errs, err)
			continue
		}
		nodes = append(nodes, n)
	}
	return nodes, errors.Join(errs...)
}

// allowedChar checks the subsystem the kernel registered n's number in:
// one of CompanionSubsystems, or misc under a name of CompanionMisc.
func allowedChar(sysfs string, n DeviceNode) error {
	num := strconv.FormatUint(uint64(n.Major), 10) + ":" + strconv.FormatUint(uint64(n.Minor), 10)
	dir, err := filepath.EvalSymlinks(filepath.Join(sysfs, "dev", "char", num))
	if err != nil {
		return fmt.Errorf("%w: %s (%s): the kernel has no device registered for it, so its kind cannot be told: %w", ErrCompanionRefused, n.Path, num, err)
	}
	sub, err := os.Readlink(filepath.Join(dir, "subsystem"))
	if err != nil {
		return fmt.Errorf("%w: %s (%s): no subsystem: %w", ErrCompanionRefused, n.Path, num, err)
	}
	return allowed(filepath.Base(sub), filepath.Base(dir), n.Path, num)
}

// allowed applies the allowlist to a node of subsystem sub whose sysfs
// device is named name.
func allowed(sub, name, node, num string) error {
	switch {
	case sub == ClassDRM || sub == ClassAccel:
		return fmt.Errorf("%w: %s (%s) is a %s node: another card's node is never a companion (it would bypass allocation)", ErrCompanionRefused, node, num, sub)
	case slices.Contains(CompanionSubsystems, sub):
		return nil
	case sub == "misc" && slices.Contains(CompanionMisc, name):
		return nil
	case sub == "misc":
		return fmt.Errorf("%w: %s (%s) is misc device %q, not one of the media blocks %s", ErrCompanionRefused, node, num, name, strings.Join(CompanionMisc, ", "))
	}
	return fmt.Errorf("%w: %s (%s) is of subsystem %q, not one of %s", ErrCompanionRefused, node, num, sub, strings.Join(CompanionSubsystems, ", "))
}

// tiedNodes are the nodes of subsystem sub whose sysfs device is tied to
// card (see Companion.Subsystem).
func tiedNodes(roots Roots, card *Card, sub string) ([]DeviceNode, error) {
	parent, err := filepath.EvalSymlinks(card.SysfsPath)
	if err != nil {
		return nil, fmt.Errorf("%w: card device %s: %w", ErrCompanionMissing, card.SysfsPath, err)
	}
	sysReal, err := filepath.EvalSymlinks(roots.Sysfs)
	if err != nil {
		return nil, fmt.Errorf("%w: sysfs root: %w", ErrCompanionMissing, err)
	}
	class := filepath.Join(roots.Sysfs, "class", sub)
	entries, err := os.ReadDir(class)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", ErrCompanionMissing, err)
	}
	var nodes []DeviceNode
	var errs []error
	for _, e := range entries {
		dir, err := filepath.EvalSymlinks(filepath.Join(class, e.Name()))
		if err != nil || !within(sysReal, dir) {
			continue // a class entry that does not resolve (within the root) is no node of this card
		}
		dev, err := filepath.EvalSymlinks(filepath.Join(dir, "device"))
		if err != nil || !tied(card, parent, dev) {
			continue
		}
		n, err := classNode(roots, dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %s: %w", ErrCompanionRefused, dir, err))
			continue
		}
		// The kernel's record of the number decides, not the class
		// directory the entry was found in.
		if err := allowedChar(roots.Sysfs, n); err != nil {
			errs = append(errs, err)
			continue
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 && len(errs) == 0 {
		return nil, fmt.Errorf("%w: no %s node in %s is tied to the card's device %s", ErrCompanionMissing, sub, class, parent)
	}
	return nodes, errors.Join(errs...)
}

// tied reports whether dev, a resolved sysfs device, belongs with card,
// whose resolved parent device is parent.
func tied(card *Card, parent, dev string) bool {
	if within(parent, dev) {
		return true
	}
	switch card.Bus {
	case "pci":
		// Another function of the card's PCI slot (DDDD:BB:DD.F).
		slot := strings.TrimSuffix(card.PCIAddress, filepath.Ext(card.PCIAddress))
		for d := dev; d != "/" && d != "."; d = filepath.Dir(d) {
			if b := filepath.Base(d); isPCIAddress(b) && strings.TrimSuffix(b, filepath.Ext(b)) == slot {
				return true
			}
		}
	case "platform":
		// The same SoC: below the bus node that holds the card's device.
		return within(filepath.Dir(parent), dev)
	}
	return false
}

// classNode is the node of the class device dir: its numbers from
// `dev`, its name under /dev from DEVNAME in `uevent`, checked against
// the node under roots.Dev.
func classNode(roots Roots, dir string) (DeviceNode, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "dev"))
	if err != nil {
		return DeviceNode{}, err
	}
	major, minor, err := ParseDev(string(raw))
	if err != nil {
		return DeviceNode{}, err
	}
	name := filepath.Base(dir)
	if ue, err := os.ReadFile(filepath.Join(dir, "uevent")); err == nil {
		for _, l := range strings.Split(string(ue), "\n") {
			if v, ok := strings.CutPrefix(l, "DEVNAME="); ok && v != "" {
				name = v
			}
		}
	}
	if path.Clean(name) != name || strings.HasPrefix(name, "/") || strings.HasPrefix(name, "..") {
		return DeviceNode{}, fmt.Errorf("DEVNAME %s is not a path under /dev", quote(name))
	}
	n, err := statChar(filepath.Join(roots.Dev, name))
	if err != nil {
		return DeviceNode{}, err
	}
	if n.Major != major || n.Minor != minor {
		return DeviceNode{}, fmt.Errorf("%w: %s is %d:%d, sysfs says %d:%d", ErrNodeMismatch, n.HostPath, n.Major, n.Minor, major, minor)
	}
	n.Path = "/dev/" + name
	return n, nil
}
