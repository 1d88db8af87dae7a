package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runContainerdS is where containerd-shim-runc-v2 puts its sockets; it is
// fixed at the package default of containerd and cannot be moved.
const runContainerdS = "/run/containerd/s"

// nodeState is what teardown needs to undo a node, also after the process
// that started it died. It is written to <node dir>/node.json.
type nodeState struct {
	Dir                    string   `json:"dir"`
	CgroupRoot             string   `json:"cgroupRoot"`
	ContainerdSock         string   `json:"containerdSock"`
	DevicePluginDirExisted bool     `json:"devicePluginDirExisted"`
	KubeletDirExisted      bool     `json:"kubeletDirExisted"`
	DevicePluginBefore     []string `json:"devicePluginBefore"`
	RunContainerdExisted   bool     `json:"runContainerdExisted"`
	RunContainerdSExisted  bool     `json:"runContainerdSExisted"`
	ShimSocketsBefore      []string `json:"shimSocketsBefore"`
	ContainerLogDirExisted bool     `json:"containerLogDirExisted"`
	// Links are network links of the harness to delete (a cluster's
	// bridges).
	Links []string `json:"links,omitempty"`
}

func (s *nodeState) save() error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.Dir, "node.json"), data, 0o644)
}

func loadState(dir string) (*nodeState, error) {
	data, err := os.ReadFile(filepath.Join(dir, "node.json"))
	if err != nil {
		return nil, err
	}
	var s nodeState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("parse %s: %w", filepath.Join(dir, "node.json"), err)
	}
	if s.Dir != dir {
		return nil, fmt.Errorf("%s names directory %q", filepath.Join(dir, "node.json"), s.Dir)
	}
	return &s, nil
}

// reapStale undoes every node directory under workDir. It must only run
// while the machine lock is held, when no node of ours is alive.
func reapStale(log Logger, workDir string) error {
	entries, err := os.ReadDir(workDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", workDir, err)
	}
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(workDir, e.Name())
		st, err := loadState(dir)
		if err != nil {
			// Created but never started: only its directory is left.
			st = &nodeState{Dir: dir}
		}
		log.Logf("cleaning up %s, left by an earlier run", dir)
		if err := cleanupState(st); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cleanupState removes every trace of a node: processes, mounts, cgroups,
// files in shared directories, and its own directory.
func cleanupState(st *nodeState) error {
	var errs []error
	if entries, err := os.ReadDir(filepath.Join(st.Dir, "pids")); err == nil {
		for _, e := range entries {
			killPidFile(filepath.Join(st.Dir, "pids", e.Name()))
		}
	}
	if err := killNodeProcesses(st); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(st.Dir); err != nil {
		errs = append(errs, err)
	}
	for _, link := range st.Links {
		if err := deleteLink(link); err != nil {
			errs = append(errs, err)
		}
	}
	if st.CgroupRoot != "" {
		if err := removeCgroups(st.CgroupRoot); err != nil {
			errs = append(errs, err)
		}
	}
	if err := cleanDevicePluginDir(st); err != nil {
		errs = append(errs, err)
	}
	cleanShimSockets(st)
	cleanContainerLogDir(st)
	if err := os.RemoveAll(st.Dir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", st.Dir, err))
	}
	return errors.Join(errs...)
}

// killNodeProcesses kills the node's shims (found by containerd address)
// and every process in the node's cgroups (pause and workloads), until
// none is left.
func killNodeProcesses(st *nodeState) error {
	var left []int
	for attempt := 0; attempt < 50; attempt++ {
		left = left[:0]
		for _, pid := range allPids() {
			if pid == os.Getpid() {
				continue
			}
			if st.ContainerdSock != "" && isShimOf(pid, st.ContainerdSock) || st.CgroupRoot != "" && inCgroup(pid, st.CgroupRoot) {
				left = append(left, pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("processes of node %s survive SIGKILL: %v", st.Dir, left)
}

func allPids() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func isShimOf(pid int, containerdSock string) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(data) == 0 {
		return false
	}
	args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	if !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
		return false
	}
	for i, a := range args {
		if a == "-address" && i+1 < len(args) && args[i+1] == containerdSock {
			return true
		}
	}
	return false
}

func inCgroup(pid int, root string) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return false
	}
	prefix := "/" + root
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[2] == prefix || strings.HasPrefix(parts[2], prefix+"/") {
			return true
		}
	}
	return false
}

type mountInfo struct {
	point  string
	fstype string
}

func mounts() ([]mountInfo, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []mountInfo
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 10 {
			continue
		}
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) {
			continue
		}
		out = append(out, mountInfo{point: unescapeMount(fields[4]), fstype: fields[sep+1]})
	}
	return out, nil
}

// unescapeMount decodes the octal escapes (\040 for space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsUnder lists mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	ms, err := mounts()
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range ms {
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			out = append(out, m.point)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func unmountUnder(dir string) error {
	for attempt := 0; attempt < 5; attempt++ {
		points := mountsUnder(dir)
		if len(points) == 0 {
			return nil
		}
		for _, p := range points {
			_ = unix.Unmount(p, unix.MNT_DETACH)
		}
	}
	if left := mountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("mounts under %s survive unmount: %v", dir, left)
	}
	return nil
}

// cgroupMounts returns the mount points of every cgroup hierarchy.
func cgroupMounts() []string {
	ms, err := mounts()
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		if (m.fstype == "cgroup" || m.fstype == "cgroup2") && !seen[m.point] {
			seen[m.point] = true
			out = append(out, m.point)
		}
	}
	return out
}

// createCgroups makes root in every hierarchy, so the kubelet can use it
// as its cgroupRoot. cpuset needs cpus and mems before tasks can join.
func createCgroups(root string) error {
	for _, mp := range cgroupMounts() {
		dir := filepath.Join(mp, root)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			parent := filepath.Join(mp, f)
			if v, err := os.ReadFile(parent); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("init cgroup %s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// removeCgroups removes root and its children in every hierarchy.
func removeCgroups(root string) error {
	var errs []error
	for _, mp := range cgroupMounts() {
		dir := filepath.Join(mp, root)
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			var err error
			for attempt := 0; attempt < 20; attempt++ {
				if err = unix.Rmdir(d); err == nil || errors.Is(err, unix.ENOENT) {
					err = nil
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

func dirNames(dir string) ([]string, bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, false
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, true
}

// cleanDevicePluginDir removes what the node left in the kubelet's fixed
// device-plugin directory: every entry that was not there before it
// started, and the directory itself (and /var/lib/kubelet) when the node
// created them.
func cleanDevicePluginDir(st *nodeState) error {
	before := map[string]bool{}
	for _, n := range st.DevicePluginBefore {
		before[n] = true
	}
	names, ok := dirNames(DevicePluginDir)
	if !ok {
		// A multi-node cluster makes /var/lib/kubelet alone, as the
		// mount point of its nodes' kubelet dirs.
		if !st.KubeletDirExisted {
			_ = os.Remove(filepath.Dir(DevicePluginDir))
		}
		return nil
	}
	var errs []error
	for _, n := range names {
		if before[n] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(DevicePluginDir, n)); err != nil {
			errs = append(errs, err)
		}
	}
	if !st.DevicePluginDirExisted {
		_ = os.Remove(DevicePluginDir)
	}
	if !st.KubeletDirExisted {
		_ = os.Remove(filepath.Dir(DevicePluginDir))
	}
	return errors.Join(errs...)
}

// cleanShimSockets removes shim sockets that appeared while the node ran
// and that nobody serves any more, and /run/containerd when the node
// created it.
func cleanShimSockets(st *nodeState) {
	before := map[string]bool{}
	for _, n := range st.ShimSocketsBefore {
		before[n] = true
	}
	names, _ := dirNames(runContainerdS)
	for _, n := range names {
		p := filepath.Join(runContainerdS, n)
		if before[n] || socketLive(p) {
			continue
		}
		_ = os.Remove(p)
	}
	if !st.RunContainerdSExisted {
		_ = os.Remove(runContainerdS)
	}
	if !st.RunContainerdExisted {
		_ = os.Remove(filepath.Dir(runContainerdS))
	}
}

// containerLogDir is where the kubelet links container logs, whatever its
// podLogsDir says.
const containerLogDir = "/var/log/containers"

// cleanContainerLogDir removes the kubelet's links to the node's logs and
// the directory when the node created it and it is empty.
func cleanContainerLogDir(st *nodeState) {
	names, _ := dirNames(containerLogDir)
	for _, n := range names {
		p := filepath.Join(containerLogDir, n)
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, st.Dir+"/") {
			_ = os.Remove(p)
		}
	}
	if !st.ContainerLogDirExisted {
		_ = os.Remove(containerLogDir)
	}
}

func socketLive(path string) bool {
	c, err := net.DialTimeout("unix", path, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
