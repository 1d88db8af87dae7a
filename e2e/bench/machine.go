package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Params are the run's parameters: the machine and how it was loaded, and
// how often each thing was measured.
type Params struct {
	Machine       Machine    `json:"machine"`
	LoadAvgBefore [3]float64 `json:"loadavg_before"`
	LoadAvgAfter  [3]float64 `json:"loadavg_after"`
	Started       string     `json:"started"`
	DurationS     float64    `json:"duration_s"`
	// Repetitions counts the samples behind each key.
	Repetitions map[string]int `json:"repetitions"`
	// Dirs are the directories the file-system work ran in, with their
	// file system type.
	Dirs map[string]string `json:"dirs"`
	// Versions of the runtime pieces the container path ran through, and
	// the size and build tags of the product binaries.
	Versions map[string]string `json:"versions,omitempty"`
	// Steps are the parts of the run, in order.
	Steps []Step `json:"steps"`
	// Notes are remarks about this run.
	Notes []string `json:"notes,omitempty"`
}

// Step is one part of the run.
type Step struct {
	Name          string     `json:"name"`
	DurationS     float64    `json:"duration_s"`
	LoadAvgBefore [3]float64 `json:"loadavg_before"`
}

// Machine describes the host.
type Machine struct {
	NProc      int    `json:"nproc"`
	CPUModel   string `json:"cpu_model"`
	MemTotalMB int    `json:"mem_total_mb"`
	Kernel     string `json:"kernel"`
	OS         string `json:"os"`
	Cgroup     string `json:"cgroup"`
	GoVersion  string `json:"go_version"`
	Arch       string `json:"arch"`
}

// ReadMachine describes this host from /proc and uname.
func ReadMachine() Machine {
	m := Machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version(), Arch: runtime.GOARCH}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if data, err := os.ReadFile("/etc/os-release"); err == nil {
		m.OS = osName(string(data))
	}
	m.Cgroup = "v1"
	var st unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		m.Cgroup = "v2"
	}
	if kb, err := procField("/proc/meminfo", "MemTotal"); err == nil {
		m.MemTotalMB = int(kb / 1024)
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// osName is PRETTY_NAME of an os-release file.
func osName(osRelease string) string {
	for _, line := range strings.Split(osRelease, "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

// LoadAvg reads the 1, 5 and 15 minute load averages.
func LoadAvg() ([3]float64, error) {
	var la [3]float64
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return la, err
	}
	return parseLoadAvg(string(data))
}

func parseLoadAvg(s string) ([3]float64, error) {
	var la [3]float64
	f := strings.Fields(s)
	if len(f) < 3 {
		return la, fmt.Errorf("loadavg %q: want 3 numbers", s)
	}
	for i := range la {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return la, fmt.Errorf("loadavg %q: %w", s, err)
		}
		la[i] = v
	}
	return la, nil
}

// RSSMB is the VmRSS of a process in MiB, from /proc/<pid>/status.
func RSSMB(pid int) (float64, error) {
	kb, err := procField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS")
	if err != nil {
		return 0, err
	}
	return float64(kb) / 1024, nil
}

// procField reads a "Name:   123 kB" line of a /proc file, in kB.
func procField(path, name string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return parseProcField(string(data), name)
}

func parseProcField(data, name string) (int64, error) {
	for _, line := range strings.Split(data, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != name {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			break
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", name, v, err)
		}
		if len(f) > 1 && f[1] != "kB" {
			return 0, fmt.Errorf("%s: unit %q, want kB", name, f[1])
		}
		return n, nil
	}
	return 0, fmt.Errorf("no %s line", name)
}

// FSType names the file system holding dir (tmpfs, ext4, overlay, ...).
func FSType(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	switch st.Type {
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlay"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	default:
		return fmt.Sprintf("0x%x", st.Type)
	}
}
