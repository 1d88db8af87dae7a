// Package usagetest builds fake proc trees for the usage reader: process
// directories with comm, cgroup, fd links and fdinfo files, the way the
// kernel shows a process holding DRM files. No driver is needed: tests
// and the e2e point the reader at the tree instead of /proc.
package usagetest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Proc is a fake proc root.
type Proc struct {
	// Root is the directory that stands for /proc.
	Root string
}

// New makes a fake proc root at dir (created if missing).
func New(dir string) (*Proc, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &Proc{Root: dir}, nil
}

func (p *Proc) pidDir(pid int) string { return filepath.Join(p.Root, strconv.Itoa(pid)) }

// AddProcess creates /proc/<pid> with its comm and cgroup text.
func (p *Proc) AddProcess(pid int, comm, cgroup string) error {
	dir := p.pidDir(pid)
	for _, d := range []string{"fd", "fdinfo"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644)
}

// SetFD makes fd of pid a link to target with the given fdinfo text
// (replacing an earlier one), the way an open file looks.
func (p *Proc) SetFD(pid, fd int, target, fdinfo string) error {
	link := filepath.Join(p.pidDir(pid), "fd", strconv.Itoa(fd))
	_ = os.Remove(link)
	if err := os.Symlink(target, link); err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(p.pidDir(pid), "fdinfo", strconv.Itoa(fd)), []byte(fdinfo))
}

// CloseFD removes fd of pid.
func (p *Proc) CloseFD(pid, fd int) error {
	for _, d := range []string{"fd", "fdinfo"} {
		if err := os.Remove(filepath.Join(p.pidDir(pid), d, strconv.Itoa(fd))); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// Exit removes /proc/<pid>.
func (p *Proc) Exit(pid int) error { return os.RemoveAll(p.pidDir(pid)) }

// WriteFileAtomic writes through a temp file and a rename, so a reader
// never sees half a file.
func WriteFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// FDInfo is a builder of fdinfo texts.
type FDInfo struct {
	Driver, PDev string
	ClientID     uint64
	// Engines is drm-engine-<name> in ns; Cycles and TotalCycles are
	// drm-cycles-/drm-total-cycles-; Capacity drm-engine-capacity-.
	Engines, Cycles, TotalCycles, Capacity, MaxFreqHz map[string]uint64
	// Memory is drm-<kind>-<region> in KiB, keyed "<kind>-<region>".
	Memory map[string]uint64
}

// String renders the fdinfo text, keys in a fixed order.
func (f FDInfo) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pos:\t0\nflags:\t02100002\nmnt_id:\t26\ndrm-driver:\t%s\n", f.Driver)
	if f.PDev != "" {
		fmt.Fprintf(&b, "drm-pdev:\t%s\n", f.PDev)
	}
	fmt.Fprintf(&b, "drm-client-id:\t%d\n", f.ClientID)
	write := func(prefix, unit string, m map[string]uint64) {
		for _, k := range sortedKeys(m) {
			fmt.Fprintf(&b, "%s%s:\t%d%s\n", prefix, k, m[k], unit)
		}
	}
	write("drm-engine-", " ns", f.Engines)
	write("drm-engine-capacity-", "", f.Capacity)
	write("drm-cycles-", "", f.Cycles)
	write("drm-total-cycles-", "", f.TotalCycles)
	write("drm-maxfreq-", " Hz", f.MaxFreqHz)
	write("drm-", " KiB", f.Memory)
	return b.String()
}

func sortedKeys(m map[string]uint64) []string { return slices.Sorted(maps.Keys(m)) }

// CgroupV2Systemd is a container process's cgroup v2 text with the
// systemd driver.
func CgroupV2Systemd(podUID, containerID string) string {
	return fmt.Sprintf("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/cri-containerd-%s.scope\n",
		strings.ReplaceAll(podUID, "-", "_"), containerID)
}

// CgroupV1Cgroupfs is a cgroup v1 text with the cgroupfs driver.
func CgroupV1Cgroupfs(podUID, containerID string) string {
	var b strings.Builder
	for i, c := range []string{"cpu,cpuacct", "devices", "memory", "pids"} {
		fmt.Fprintf(&b, "%d:%s:/kubepods/besteffort/pod%s/%s\n", 12-i, c, podUID, containerID)
	}
	b.WriteString("1:name=systemd:/kubepods/besteffort/pod" + podUID + "/" + containerID + "\n0::/\n")
	return b.String()
}

// CgroupHost is a host process's cgroup text.
const CgroupHost = "0::/system.slice/plex.service\n"
