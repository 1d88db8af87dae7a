package dmem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// DefaultCgroupRoot is where the host's cgroup v2 hierarchy is mounted.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// Files of the cgroup v2 interface this package reads, and the one a
// container's limit is set in.
const (
	// CapacityFile lists each region and its size in bytes; it exists in
	// the root cgroup only.
	CapacityFile = "dmem.capacity"
	// MaxFile is the hard limit of a cgroup, one "<region> <bytes>"
	// entry per region: the key of the OCI linux.resources.unified map.
	MaxFile           = "dmem.max"
	controllersFile   = "cgroup.controllers"
	subtreeFile       = "cgroup.subtree_control"
	controllerName    = "dmem"
	regionPrefix      = "drm/"
	maxCapacityLength = 1 << 20
)

// Why a card's memory limit cannot be enforced: the "reason" label of
// dri_cdi_nri_memory_limits_unenforceable_total and the reasons doctor
// reports.
const (
	// ReasonCgroupV1: the cgroup root is not a cgroup v2 hierarchy (no
	// cgroup.controllers); dmem exists on v2 only.
	ReasonCgroupV1 = "cgroup_v1"
	// ReasonNoController: cgroup v2 without the dmem controller (a kernel
	// before 6.14, or one built without CONFIG_CGROUP_DMEM).
	ReasonNoController = "no_dmem_controller"
	// ReasonNoRegion: the kernel has dmem, but the card registered no
	// region (i915, an xe iGPU without VRAM, an APU's carve-out).
	ReasonNoRegion = "no_region"
	// ReasonNotDelegated: dmem is not in the cgroup.subtree_control of
	// the container's parent cgroup, so the container's cgroup has no
	// dmem.max and the runtime would fail to write it.
	ReasonNotDelegated = "not_delegated"
	// ReasonUnknownCgroup: the container's cgroups path is empty or not
	// one this package can place in the hierarchy.
	ReasonUnknownCgroup = "unknown_cgroup"
	// ReasonUnreadable: the cgroup root's files cannot be read or parsed
	// (a malformed dmem.capacity).
	ReasonUnreadable = "unreadable"
)

// Reasons are every reason, in a stable order.
var Reasons = []string{ReasonCgroupV1, ReasonNoController, ReasonNoRegion, ReasonNotDelegated, ReasonUnknownCgroup, ReasonUnreadable}

// Region is one dmem region of the kernel: a card's memory the
// controller can charge and limit.
type Region struct {
	// Name is the region's key, drm/<device>/<region>, e.g.
	// drm/0000:03:00.0/vram0.
	Name string
	// Bytes is its size.
	Bytes int64
}

// Host is what the cgroup root says about dmem on this node.
type Host struct {
	// Root is the cgroup v2 mount the state was read from.
	Root string
	// V2 is set when Root is a cgroup v2 hierarchy.
	V2 bool
	// Controller is set when the kernel offers the dmem controller.
	Controller bool
	// Regions are the regions of dmem.capacity, in the file's order.
	Regions []Region
}

// ReadHost reads the dmem state under root (DefaultCgroupRoot when
// empty). A root without cgroup v2 or without dmem is a Host that says
// so, not an error; a dmem.capacity that cannot be read or parsed is an
// error naming the file.
func ReadHost(root string) (Host, error) {
	if root == "" {
		root = DefaultCgroupRoot
	}
	h := Host{Root: root}
	ctl, err := os.ReadFile(filepath.Join(root, controllersFile))
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return h, fmt.Errorf("read %s: %w", filepath.Join(root, controllersFile), err)
	}
	h.V2 = true
	if !slices.Contains(strings.Fields(string(ctl)), controllerName) {
		return h, nil
	}
	capPath := filepath.Join(root, CapacityFile)
	b, err := os.ReadFile(capPath)
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return h, fmt.Errorf("read %s: %w", capPath, err)
	}
	h.Controller = true
	if h.Regions, err = ParseCapacity(b); err != nil {
		return h, fmt.Errorf("parse %s: %w", capPath, err)
	}
	return h, nil
}

// ParseCapacity parses the content of dmem.capacity: one "<region>
// <bytes>" line per region. Regions of other subsystems than drm are
// kept; a malformed line is an error naming it.
func ParseCapacity(b []byte) ([]Region, error) {
	if len(b) > maxCapacityLength {
		return nil, fmt.Errorf("%d bytes, more than %d", len(b), maxCapacityLength)
	}
	var out []Region
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxCapacityLength)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d %q: want \"<region> <bytes>\"", n, trunc(line))
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("line %d %q: size %q is not a byte count", n, trunc(line), trunc(f[1]))
		}
		out = append(out, Region{Name: f[0], Bytes: v})
	}
	return out, sc.Err()
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// CardRegions are the regions of card (its stable ID, the PCI address
// of a PCI card): those named drm/<card>/<region>, sorted by name.
func (h Host) CardRegions(card string) []Region {
	return CardRegions(h.Regions, card)
}

// CardRegions is Host.CardRegions over a list of regions.
func CardRegions(regions []Region, card string) []Region {
	prefix := regionPrefix + card + "/"
	var out []Region
	for _, r := range regions {
		if rest, ok := strings.CutPrefix(r.Name, prefix); ok && rest != "" && !strings.Contains(rest, "/") {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Region) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Total is the sum of the regions' sizes.
func Total(regions []Region) int64 {
	var t int64
	for _, r := range regions {
		t += r.Bytes
	}
	return t
}

// Unenforceable says why a card's memory limit cannot be set.
type Unenforceable struct {
	// Card is the card's stable ID.
	Card string
	// Reason is one of the Reason constants.
	Reason string
	// Detail explains it for a person.
	Detail string
}

func (u *Unenforceable) Error() string {
	return fmt.Sprintf("card %s: device memory limit cannot be enforced (%s): %s", u.Card, u.Reason, u.Detail)
}

// CardEnforceable returns the card's regions when the node can limit
// them (cgroup v2, the dmem controller, and at least one region of the
// card in dmem.capacity), or why not. It does not look at a
// container's cgroup: see Delegated.
func (h Host) CardEnforceable(card string) ([]Region, *Unenforceable) {
	switch {
	case !h.V2:
		return nil, &Unenforceable{Card: card, Reason: ReasonCgroupV1,
			Detail: fmt.Sprintf("%s is not a cgroup v2 hierarchy (no %s); the dmem controller exists on cgroup v2 only", h.Root, controllersFile)}
	case !h.Controller:
		return nil, &Unenforceable{Card: card, Reason: ReasonNoController,
			Detail: fmt.Sprintf("the kernel has no dmem cgroup controller (not in %s, or no %s; Linux 6.14 or later with CONFIG_CGROUP_DMEM)",
				filepath.Join(h.Root, controllersFile), CapacityFile)}
	}
	regions := h.CardRegions(card)
	if len(regions) == 0 {
		return nil, &Unenforceable{Card: card, Reason: ReasonNoRegion,
			Detail: fmt.Sprintf("%s lists no region drm/%s/* (its driver registers none: i915, an xe iGPU without VRAM, an APU's carve-out)",
				filepath.Join(h.Root, CapacityFile), card)}
	}
	return regions, nil
}

// ParentCgroup is the cgroup, relative to the cgroup root, under which
// the runtime creates the container's cgroup, from the OCI
// linux.cgroupsPath. The cgroupfs form is a path, whose parent is its
// directory; the systemd form is "<slice>:<prefix>:<name>", whose
// parent is the slice, expanded the way systemd nests slices
// (a-b-c.slice is a.slice/a-b.slice/a-b-c.slice).
func ParentCgroup(cgroupsPath string) (string, error) {
	if cgroupsPath == "" {
		return "", errors.New("the container has no cgroups path")
	}
	if strings.HasPrefix(cgroupsPath, "/") {
		p := path.Clean(cgroupsPath)
		if p == "/" {
			return "", fmt.Errorf("cgroups path %q is the root", trunc(cgroupsPath))
		}
		return path.Dir(p), nil
	}
	parts := strings.Split(cgroupsPath, ":")
	if len(parts) != 3 || parts[2] == "" {
		return "", fmt.Errorf("cgroups path %q is neither a path nor <slice>:<prefix>:<name>", trunc(cgroupsPath))
	}
	return expandSlice(parts[0])
}

// expandSlice is the path of a systemd slice in the hierarchy.
func expandSlice(slice string) (string, error) {
	if slice == "" || slice == "-.slice" {
		return "/", nil
	}
	name, ok := strings.CutSuffix(slice, ".slice")
	if !ok || name == "" || strings.Contains(name, "/") || strings.HasPrefix(name, "-") ||
		strings.HasSuffix(name, "-") || strings.Contains(name, "--") {
		return "", fmt.Errorf("systemd slice %q is not a valid slice name", trunc(slice))
	}
	var b strings.Builder
	prefix := ""
	for _, comp := range strings.Split(name, "-") {
		b.WriteString("/" + prefix + comp + ".slice")
		prefix += comp + "-"
	}
	return b.String(), nil
}

// Delegated checks that the container's cgroup will have dmem.max: dmem
// is enabled in the subtree_control of its parent (from cgroupsPath).
func (h Host) Delegated(card, cgroupsPath string) *Unenforceable {
	parent, err := ParentCgroup(cgroupsPath)
	if err != nil {
		return &Unenforceable{Card: card, Reason: ReasonUnknownCgroup, Detail: err.Error()}
	}
	file := filepath.Join(h.Root, filepath.FromSlash(parent), subtreeFile)
	b, err := os.ReadFile(file)
	if err != nil {
		return &Unenforceable{Card: card, Reason: ReasonNotDelegated,
			Detail: fmt.Sprintf("cannot read the parent cgroup's %s: %v", subtreeFile, err)}
	}
	if !slices.Contains(strings.Fields(string(b)), controllerName) {
		return &Unenforceable{Card: card, Reason: ReasonNotDelegated,
			Detail: fmt.Sprintf("dmem is not enabled in %s (it holds %q), so the container's cgroup has no %s", file, strings.TrimSpace(trunc(string(b))), MaxFile)}
	}
	return nil
}

// Limit is one region's hard limit.
type Limit struct {
	Region string
	Bytes  int64
}

// Split divides amount bytes of a card over its regions in proportion to
// their sizes, rounding down, so that the limits never add up to more
// than the card's allocation. A region's part is at least one byte when
// amount is positive. amount must be positive.
func Split(regions []Region, amount int64) []Limit {
	var total uint64
	for _, r := range regions {
		total += uint64(r.Bytes)
	}
	out := make([]Limit, 0, len(regions))
	for _, r := range regions {
		part := amount
		if len(regions) > 1 && total > 0 {
			part = mulDiv(amount, r.Bytes, total)
		}
		if part > r.Bytes && r.Bytes > 0 {
			part = r.Bytes
		}
		if part < 1 {
			part = 1
		}
		out = append(out, Limit{Region: r.Name, Bytes: part})
	}
	return out
}

// mulDiv is a*b/c rounded down, for a, b >= 0 and b <= c, without
// overflow: the quotient is at most a.
func mulDiv(a, b int64, c uint64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, c)
	return int64(q)
}

// Value is the content of MaxFile for limits: one "<region> <bytes>"
// line per region, sorted by region. Runtimes built on
// opencontainers/cgroups (runc) write a unified value line by line, one
// write per region, which is what the kernel accepts (docs/sharing.md).
func Value(limits []Limit) string {
	limits = slices.Clone(limits)
	slices.SortFunc(limits, func(a, b Limit) int { return strings.Compare(a.Region, b.Region) })
	var b strings.Builder
	for i, l := range limits {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l.Region + " " + strconv.FormatInt(l.Bytes, 10))
	}
	return b.String()
}
