package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dri-cdi/dri-cdi/pkg/dmem"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// failCgroupV1Fix is the fix of a node still on cgroup v1.
const failCgroupV1Fix = "kubelet 1.35 and later refuse cgroup v1 unless failCgroupV1: false is set in the KubeletConfiguration; move the node to cgroup v2"

// checkCgroup reports the cgroup version of <sysfs>/fs/cgroup and what
// enforces a container's device access there: the v1 devices controller,
// or on v2 an eBPF program attached to the container's cgroup. On v2 it
// also reports the dmem controller (checkDmem).
func (d *doctor) checkCgroup() {
	root := filepath.Join(d.opts.SysfsRoot, "fs", "cgroup")
	exists := func(p string) bool { _, err := os.Stat(d.host(filepath.Join(root, p))); return err == nil }
	switch {
	case exists("cgroup.controllers"):
		d.add("cgroup", OK, "cgroup v2 (unified): device access is enforced by an eBPF program (cgroup_device) attached to each container's cgroup, "+
			"by runc with the cgroupfs driver and by systemd from the scope's DeviceAllow= with the systemd driver; "+
			"`bpftool cgroup show /sys/fs/cgroup/<container's cgroup>` lists it", "")
		d.checkDmem(root)
	case exists("unified/cgroup.controllers") && exists("devices"):
		d.add("cgroup", Warn, "cgroup v1 hybrid: the v1 devices controller enforces device access (each container's devices.list); "+
			"the cgroup2 tree at "+filepath.Join(root, "unified")+" holds no device programs", failCgroupV1Fix)
	case exists("devices"):
		d.add("cgroup", Warn, "cgroup v1: the devices controller enforces device access (each container's devices.list)", failCgroupV1Fix)
	default:
		d.add("cgroup", Warn, fmt.Sprintf("cannot tell the cgroup version from %s", root), "check that cgroupfs is mounted at /sys/fs/cgroup")
	}
}

// checkDmem reports whether the dmem controller (Linux 6.14+), which
// limits a cgroup's device memory (GPU VRAM), is there, and the regions
// the drivers registered. Only the root cgroup has dmem.capacity. A
// cgroup2 mount whose top is not the root (it has cgroup.type, which the
// root has not) is the view of a private cgroup namespace, as inside a
// container: there doctor sees only what is delegated to that sub-tree.
func (d *doctor) checkDmem(root string) {
	read := func(name string) (string, error) {
		data, err := os.ReadFile(d.host(filepath.Join(root, name)))
		return string(data), err
	}
	controllers, _ := read("cgroup.controllers")
	has := slices.Contains(strings.Fields(controllers), "dmem")
	if _, err := os.Stat(d.host(filepath.Join(root, "cgroup.type"))); err == nil {
		const why = "doctor sees a cgroup sub-tree at %s, not the root (a private cgroup namespace, as in a container): the root-only dmem.capacity is not visible here"
		fix := "run dri-cdi doctor on the node, or with --host-root on the node's / (kubectl debug node/<node> --profile=sysadmin mounts it at /host)"
		if has {
			d.add("cgroup.dmem", OK, fmt.Sprintf(why+"; dmem is delegated to this sub-tree, so the kernel has it", root), "")
			return
		}
		d.add("cgroup.dmem", Warn, fmt.Sprintf(why+", and dmem is not delegated to this sub-tree: cannot tell whether the kernel has it", root), fix)
		return
	}
	if !has {
		d.add("cgroup.dmem", OK, "no dmem controller (Linux 6.14+ with CONFIG_CGROUP_DMEM): containers start as usual, but their GPU memory cannot be limited per container", "")
		return
	}
	capacity, err := read("dmem.capacity")
	if err != nil {
		d.add("cgroup.dmem", Warn, fmt.Sprintf("dmem is a controller, but its capacity cannot be read: %v", err), "run as root on the node")
		return
	}
	regions := parseDmemCapacity(capacity)
	if len(regions) == 0 {
		d.add("cgroup.dmem", OK, "dmem controller present, but no driver registered a region (i915 registers none; xe and amdgpu register their VRAM)", "")
		return
	}
	d.add("cgroup.dmem", OK, fmt.Sprintf("dmem controller present, %d region(s): %s", len(regions), strings.Join(regions, ", ")), "")
}

// parseDmemCapacity turns dmem.capacity's "<region> <bytes>" lines into
// "<region> (<size>)".
func parseDmemCapacity(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		size := f[1]
		if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
			size = humanBytes(n)
		}
		out = append(out, fmt.Sprintf("%s (%s)", f[0], size))
	}
	return out
}

// humanBytes formats n in the largest binary unit that keeps it >= 1.
func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// checkMemoryLimits reports, card by card, whether dri-cdi-nri can limit
// the device memory of the card's shares (dmem.max, docs/sharing.md),
// and why not: the same decision, from the same code (package dmem), as
// the plugin makes for a container. What it cannot see from here is the
// container's own parent cgroup; it checks the root's
// cgroup.subtree_control, which every container's cgroup depends on. On
// a cgroup sub-tree (a private cgroup namespace) it says nothing per
// card: checkDmem already says what cannot be seen there.
func (d *doctor) checkMemoryLimits(cards []drm.Card) {
	root := d.host(filepath.Join(d.opts.SysfsRoot, "fs", "cgroup"))
	if _, err := os.Stat(filepath.Join(root, "cgroup.type")); err == nil {
		return
	}
	host, err := dmem.ReadHost(root)
	if err != nil {
		d.add("memory", Warn, err.Error(), "run as root on the node; the kernel writes dmem.capacity")
		return
	}
	delegated := false
	if b, err := os.ReadFile(filepath.Join(root, "cgroup.subtree_control")); err == nil {
		delegated = slices.Contains(strings.Fields(string(b)), "dmem")
	}
	for _, c := range cards {
		name := "memory." + c.ID
		regions, why := host.CardEnforceable(c.ID)
		if why != nil {
			d.add(name, OK, fmt.Sprintf("no device memory limit for shares of card %s (%s): %s; its shares start without one", c.ID, why.Reason, why.Detail), "")
			continue
		}
		var parts []string
		for _, r := range regions {
			parts = append(parts, fmt.Sprintf("%s (%s)", r.Name, humanBytes(uint64(r.Bytes))))
		}
		if !delegated {
			d.add(name, Warn, fmt.Sprintf("card %s has dmem region(s) %s, but the root cgroup does not enable dmem for its children (cgroup.subtree_control): "+
				"no container's cgroup has dmem.max, so its shares start without a limit (%s)", c.ID, strings.Join(parts, ", "), dmem.ReasonNotDelegated),
				"enable dmem in cgroup.subtree_control from the root down to the pods' cgroups (the cgroup manager of the node, systemd or the kubelet's cgroupfs driver, must enable it)")
			continue
		}
		d.add(name, OK, fmt.Sprintf("card %s: device memory limits enforceable on region(s) %s; dri-cdi-nri sets dmem.max for shares with memory "+
			"where the pod's cgroup enables dmem too", c.ID, strings.Join(parts, ", ")), "")
	}
}
