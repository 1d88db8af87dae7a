package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The cgroup v2 rig (NodeOptions.CgroupV2).
//
// The host keeps its v1 hierarchies (its own services use them), but the
// kernel has one cgroup2 tree, mounted at /sys/fs/cgroup/unified on a
// hybrid host. The rig is a process, the holder, that
//
//  1. enters a private mount namespace (unshare --mount --propagation
//     private), so nothing it mounts reaches the host;
//  2. joins the node's cgroup in that cgroup2 tree (createCgroups made
//     it) and enters a new cgroup namespace there (unshare --cgroup);
//  3. mounts cgroup2 at /sys/fs/cgroup: in that namespace the mount shows
//     the node's cgroup as its root.
//
// containerd and the kubelet are started inside the holder's namespaces
// (inRig: join the node's cgroup, then nsenter --mount --cgroup), so they
// and runc see a cgroup2fs at /sys/fs/cgroup and manage every container on
// v2: runc turns the OCI device rules into an eBPF program attached to the
// container's cgroup. Everything they create lands below the node's cgroup
// in the host's tree, where teardown (removeCgroups) already looks, and
// every process of the rig is in that cgroup, where killNodeProcesses
// looks. dri-cdi's own processes stay on the host: they only talk to the
// kubelet and containerd through sockets on the shared filesystem.
//
// The rig's root offers only the controllers the host's v2 root delegates
// (none on these machines: cpu, memory and pids stay bound to v1), so runc
// could not write the cpu, memory, pids or hugetlb limits the kubelet
// asks for. startRig probes the root's cgroup.controllers, and runc-rig
// leaves out exactly the limits of the controllers it lacks. The device
// rules are never touched.

// rigControllers are the controllers whose limits the kubelet and
// containerd may put into a container's OCI spec.
var rigControllers = []string{"cpu", "cpuset", "memory", "pids", "hugetlb", "io"}

// rigReady is what the holder prints once /sys/fs/cgroup is mounted.
const rigReady = "cgroup v2 rig ready"

// cgroupV2Rig is a node's v2 rig.
type cgroupV2Rig struct {
	holder *Process
	// dir is the node's cgroup in the host's cgroup2 tree: the root of
	// the rig's cgroup namespace and of its /sys/fs/cgroup.
	dir string
	// offered are the controllers in the rig root's cgroup.controllers;
	// missing are those of rigControllers it lacks.
	offered, missing []string
}

// HostCgroup2Mount returns where this host mounts its cgroup2 tree:
// /sys/fs/cgroup/unified on a hybrid host, /sys/fs/cgroup on a unified one.
func HostCgroup2Mount() (string, error) {
	ms, err := mounts()
	if err != nil {
		return "", err
	}
	var found []string
	for _, m := range ms {
		if m.fstype == "cgroup2" {
			found = append(found, m.point)
		}
	}
	for _, want := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if slices.Contains(found, want) {
			return want, nil
		}
	}
	if len(found) > 0 {
		return found[0], nil
	}
	return "", errors.New("this host mounts no cgroup2 tree (none in /proc/self/mountinfo)")
}

// HostCgroupUnified reports whether this host's own /sys/fs/cgroup is a
// cgroup2 tree (a unified host), where every node is managed on v2
// without the rig.
func HostCgroupUnified() bool {
	var fs unix.Statfs_t
	return unix.Statfs("/sys/fs/cgroup", &fs) == nil && fs.Type == unix.CGROUP2_SUPER_MAGIC
}

// startRig starts the node's holder and probes what its root offers.
func (n *Node) startRig(ctx context.Context) error {
	mount, err := HostCgroup2Mount()
	if err != nil {
		return fmt.Errorf("cgroup v2 rig: %w", err)
	}
	dir := filepath.Join(mount, n.cgroupRoot)
	if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
		return fmt.Errorf("cgroup v2 rig: the node's cgroup: %w", err)
	}
	for _, tool := range []string{"unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("cgroup v2 rig: %w (util-linux)", err)
		}
	}
	// $0 is the node's cgroup. Join it, then make it the root of a new
	// cgroup namespace, then mount that namespace's cgroup2 view.
	script := `echo $$ > "$0/cgroup.procs" && exec unshare --cgroup -- /bin/sh -c 'mount -t cgroup2 none /sys/fs/cgroup && echo "` +
		rigReady + `" && exec sleep infinity'`
	p, err := startProc("cgroupv2-rig", n.logPath("cgroupv2-rig"), n.pidDir(), nil,
		"/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, dir)
	if err != nil {
		return err
	}
	n.rig = &cgroupV2Rig{holder: p, dir: dir}
	if err := p.waitReady(ctx, "the cgroup v2 rig", 10*time.Second, func() bool {
		// A line of its own: the log's first line, the command, holds
		// the text too.
		return slices.Contains(strings.Split(tailFile(n.logPath("cgroupv2-rig"), 2000), "\n"), rigReady)
	}); err != nil {
		return err
	}
	// What runc in the rig will see, through the holder's root.
	seen := filepath.Join("/proc", strconv.Itoa(p.Pid()), "root", "sys", "fs", "cgroup")
	var fs unix.Statfs_t
	if err := unix.Statfs(seen, &fs); err != nil {
		return fmt.Errorf("cgroup v2 rig: %w", err)
	}
	if fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return fmt.Errorf("cgroup v2 rig: /sys/fs/cgroup in the rig is filesystem type %#x, not cgroup2", fs.Type)
	}
	data, err := os.ReadFile(filepath.Join(seen, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroup v2 rig: %w", err)
	}
	n.rig.offered = strings.Fields(string(data))
	for _, c := range rigControllers {
		if !slices.Contains(n.rig.offered, c) {
			n.rig.missing = append(n.rig.missing, c)
		}
	}
	n.log.Logf("cgroup v2 rig (pid %d): /sys/fs/cgroup is cgroup2 rooted at %s, whose controllers are [%s]; runc-rig leaves out the limits of [%s]",
		p.Pid(), dir, strings.Join(n.rig.offered, " "), strings.Join(n.rig.missing, " "))
	return nil
}

// stopRig stops the holder; the namespaces go with the last process in
// them.
func (n *Node) stopRig() {
	if n.rig != nil {
		n.rig.holder.Stop(syscall.SIGTERM, 5*time.Second)
	}
}

// inRig returns argv to run in the rig: the process joins the node's
// cgroup, then enters the holder's mount and cgroup namespaces and execs
// argv, keeping its PID. Without a rig it returns argv.
func (n *Node) inRig(argv ...string) []string {
	if n.rig == nil {
		return argv
	}
	return append([]string{"/bin/sh", "-c",
		`procs=$0 pid=$1; shift; echo $$ > "$procs" && exec nsenter --target "$pid" --mount --cgroup -- "$@"`,
		filepath.Join(n.rig.dir, "cgroup.procs"), strconv.Itoa(n.rig.holder.Pid())}, argv...)
}

// rigKubeletConfig is the KubeletConfiguration the rig needs: no QoS or
// pod cgroups, which would need the cpu, memory and pids controllers the
// rig's root does not offer.
func (n *Node) rigKubeletConfig() string {
	if n.rig == nil {
		return ""
	}
	return "cgroupsPerQOS: false\nenforceNodeAllocatable: []\n"
}

// kubeletCgroupRoot is the kubelet's cgroupRoot: the node's cgroup, which
// is "/" in the rig's cgroup namespace.
func (n *Node) kubeletCgroupRoot() string {
	if n.rig != nil {
		return "/"
	}
	return "/" + n.cgroupRoot
}

// CgroupV2 reports whether the node runs on the cgroup v2 rig.
func (n *Node) CgroupV2() bool { return n.rig != nil }

// CgroupV2Controllers are the controllers the rig's root offers (its
// cgroup.controllers); nil without a rig.
func (n *Node) CgroupV2Controllers() []string {
	if n.rig == nil {
		return nil
	}
	return n.rig.offered
}

// ContainerCgroup returns the host path of the container's cgroup in the
// host's cgroup2 tree: on the rig the cgroup runc made there; on a v1 node
// of a hybrid host the v2 cgroup runc also makes next to its v1 ones.
func (n *Node) ContainerCgroup(ctx context.Context, containerID string) (string, error) {
	out, err := n.Crictl(ctx, "inspect", "-o", "json", containerID)
	if err != nil {
		return "", err
	}
	var raw struct {
		Info struct {
			RuntimeSpec struct {
				Linux struct {
					CgroupsPath string `json:"cgroupsPath"`
				} `json:"linux"`
			} `json:"runtimeSpec"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		return "", fmt.Errorf("parse crictl inspect %s: %w", containerID, err)
	}
	p := raw.Info.RuntimeSpec.Linux.CgroupsPath
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("container %s: cgroupsPath %q is not a cgroupfs path", containerID, p)
	}
	base := ""
	if n.rig != nil {
		base = n.rig.dir
	} else if base, err = HostCgroup2Mount(); err != nil {
		return "", err
	}
	return filepath.Join(base, p), nil
}

// bpftoolPath finds bpftool on PATH or in /usr/sbin, where Debian's
// package puts it (not on every PATH).
func bpftoolPath() (string, error) {
	if p, err := exec.LookPath("bpftool"); err == nil {
		return p, nil
	}
	if err := executable("/usr/sbin/bpftool"); err == nil {
		return "/usr/sbin/bpftool", nil
	}
	return "", errors.New("bpftool not found on PATH or in /usr/sbin (Debian's bpftool package; `make e2e-tools` installs it)")
}

// BPFProgram is one BPF program attached to a cgroup, as `bpftool -j
// cgroup show` lists it.
type BPFProgram struct {
	ID          int    `json:"id"`
	AttachType  string `json:"attach_type"`
	AttachFlags string `json:"attach_flags"`
	Name        string `json:"name"`
}

// AttachCgroupDevice is the attach type of a device cgroup program.
const AttachCgroupDevice = "cgroup_device"

// BPFCgroupPrograms lists the BPF programs attached to the cgroup at dir
// (a host path in the cgroup2 tree) with bpftool.
func BPFCgroupPrograms(ctx context.Context, dir string) ([]BPFProgram, error) {
	bpftool, err := bpftoolPath()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bpftool, "-j", "cgroup", "show", dir).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("bpftool cgroup show %s: %w: %s", dir, err, strings.TrimSpace(string(out)))
	}
	if len(strings.TrimSpace(string(out))) == 0 {
		return nil, nil // bpftool prints nothing for a cgroup without programs
	}
	var progs []BPFProgram
	if err := json.Unmarshal(out, &progs); err != nil {
		return nil, fmt.Errorf("parse bpftool cgroup show %s: %w: %q", dir, err, out)
	}
	return progs, nil
}

// DeviceFilter is how a container's device access is enforced on cgroup
// v2: the cgroup_device programs attached to its cgroup.
type DeviceFilter struct {
	// Cgroup is the container's cgroup, a host path in the cgroup2 tree.
	Cgroup string
	// Programs are the cgroup_device programs attached to it.
	Programs []BPFProgram
	// Listing is every program bpftool lists there, for messages.
	Listing []BPFProgram
	// AllowedChar are the char devices ("major:minor") that a rule of
	// the programs allows by exact number (runc's rules for
	// linux.resources.devices; see allowedChar).
	AllowedChar []string
	// V1Devices is the devices.list of the container's cgroup in the v1
	// devices hierarchy of a hybrid host, "" when there is none. On the
	// rig it is the host's root's, "a *:* rwm": the v1 controller allows
	// everything, so whatever the container is denied, the v2 program
	// denied.
	V1Devices string
}

// AllowsChar reports whether a program allows char device major:minor by
// an exact rule.
func (f *DeviceFilter) AllowsChar(major, minor int64) bool {
	return slices.Contains(f.AllowedChar, fmt.Sprintf("%d:%d", major, minor))
}

// AllowsCharMajor reports whether a program allows any char device of
// major by an exact rule.
func (f *DeviceFilter) AllowsCharMajor(major int64) bool {
	return slices.ContainsFunc(f.AllowedChar, func(mm string) bool { return strings.HasPrefix(mm, fmt.Sprintf("%d:", major)) })
}

// ContainerDeviceFilter finds the container's cgroup in the cgroup2 tree
// and the cgroup_device programs attached to it.
func (n *Node) ContainerDeviceFilter(ctx context.Context, containerID string) (*DeviceFilter, error) {
	dir, err := n.ContainerCgroup(ctx, containerID)
	if err != nil {
		return nil, err
	}
	all, err := BPFCgroupPrograms(ctx, dir)
	if err != nil {
		return nil, err
	}
	f := &DeviceFilter{Cgroup: dir, Listing: all}
	for _, p := range all {
		if p.AttachType != AttachCgroupDevice {
			continue
		}
		f.Programs = append(f.Programs, p)
		xlated, err := bpfProgXlated(ctx, p.ID)
		if err != nil {
			return nil, err
		}
		f.AllowedChar = append(f.AllowedChar, allowedChar(xlated)...)
	}
	if f.V1Devices, err = n.v1DevicesList(ctx, containerID); err != nil {
		return nil, err
	}
	return f, nil
}

// bpfProgXlated is `bpftool prog dump xlated id <id>`: the program's
// instructions as the kernel runs them.
func bpfProgXlated(ctx context.Context, id int) (string, error) {
	bpftool, err := bpftoolPath()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bpftool, "prog", "dump", "xlated", "id", strconv.Itoa(id)).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("bpftool prog dump xlated id %d: %w: %s", id, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// allowedChar reads the allow rules for single char devices out of a
// device program as runc v1.5.3 generates it: one block per rule that
// compares the device type (r2; 2 is char), the major (r4) and the minor
// (r5), and ends in "w0 = 1" (allow) or "w0 = 0" (deny) and exit. It
// returns "major:minor" of each exact char allow rule.
func allowedChar(xlated string) []string {
	var out []string
	char, major, minor := false, "", ""
	for _, line := range strings.Split(xlated, "\n") {
		switch {
		case strings.Contains(line, "if r2 != 0x"):
			char, major, minor = strings.Contains(line, "if r2 != 0x2 "), "", ""
		case strings.Contains(line, "if r4 != 0x"):
			major = hexOperand(line, "if r4 != ")
		case strings.Contains(line, "if r5 != 0x"):
			minor = hexOperand(line, "if r5 != ")
		case strings.Contains(line, "w0 = 1"):
			if char && major != "" && minor != "" {
				out = append(out, major+":"+minor)
			}
		case strings.Contains(line, "exit"):
			char, major, minor = false, "", ""
		}
	}
	return out
}

// hexOperand returns the decimal value of the 0x operand after prefix in
// an instruction line, "" when there is none.
func hexOperand(line, prefix string) string {
	_, rest, ok := strings.Cut(line, prefix)
	if !ok {
		return ""
	}
	v, err := strconv.ParseInt(strings.Fields(rest)[0], 0, 64)
	if err != nil {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

// v1DevicesList returns the devices.list of the container's cgroup in a
// v1 devices hierarchy, "" when the host has none.
func (n *Node) v1DevicesList(ctx context.Context, containerID string) (string, error) {
	out, err := n.Crictl(ctx, "inspect", "-o", "go-template", "--template", "{{.info.pid}}", containerID)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(out), "cgroup"))
	if err != nil {
		return "", fmt.Errorf("container %s: %w", containerID, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !slices.Contains(strings.Split(parts[1], ","), "devices") {
			continue
		}
		for _, mp := range cgroupMounts() {
			list, err := os.ReadFile(filepath.Join(mp, parts[2], "devices.list"))
			if err == nil {
				return strings.TrimSpace(string(list)), nil
			}
		}
	}
	return "", nil
}

// DoctorInRig runs `dri-cdi doctor -o json` inside the rig's mount and
// cgroup namespaces with the default paths, the way a doctor in a
// container with a private cgroup namespace sees the node: its
// /sys/fs/cgroup is the node's sub-tree of the cgroup2 tree. Only the
// cgroup results speak about the rig; the rest of the report is about
// the host's default paths.
func (n *Node) DoctorInRig(ctx context.Context) (*DoctorReport, error) {
	if n.rig == nil {
		return nil, errors.New("the node has no cgroup v2 rig")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "--target", strconv.Itoa(n.rig.holder.Pid()), "--mount", "--cgroup", "--",
		n.suite.Product.CLI, "doctor", "-o", "json")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return nil, fmt.Errorf("dri-cdi doctor in the rig: %w", err)
	}
	var rep DoctorReport
	if err := json.Unmarshal(out, &rep); err != nil {
		return nil, fmt.Errorf("parse dri-cdi doctor -o json: %w: %q", err, out)
	}
	return &rep, nil
}
