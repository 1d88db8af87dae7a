package usage

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Character device majors whose files carry DRM usage stats: DRM card and
// render nodes, and compute accelerators (drivers/accel/drm_accel.c).
const (
	MajorDRM   = 226
	MajorAccel = 261
)

// DefaultProcRoot is the host's /proc.
const DefaultProcRoot = "/proc"

// maxFDInfo bounds how much of one fdinfo file is read; a DRM client's
// stats are well under 4 KiB.
const maxFDInfo = 64 << 10

// Observation is one open DRM or accel file of one process, as one of its
// fds shows it. Several fds, and several processes, can show the same
// client (the same drm-client-id).
type Observation struct {
	PID  int
	FD   int
	Comm string
	// Major and Minor are the numbers of the device node the fd is open on.
	Major, Minor uint32
	// Owner is the container the process runs in, from its cgroup.
	Owner Owner
	Info  *FDInfo
}

// ScanResult is what one pass over a proc tree found.
type ScanResult struct {
	Observations []Observation
	// Processes is how many processes were looked at.
	Processes int
	// Unreadable counts processes whose fd list, and fds whose fdinfo,
	// could not be read for another reason than the process exiting
	// (EACCES without CAP_SYS_PTRACE, for one).
	Unreadable int
	// Malformed counts skipped drm- lines over all fdinfo files read.
	Malformed int
	// Errors holds the first few errors behind Unreadable, each naming
	// its path, for the debug log.
	Errors []error
}

// maxErrors bounds ScanResult.Errors.
const maxErrors = 8

// Reader reads the DRM clients of every process under a proc root. It
// only reads; it never opens a device node.
type Reader struct {
	root string
	// devOf returns the device numbers of the file an fd link points
	// to; tests replace it, since a fake tree cannot hold device nodes
	// without root.
	devOf func(fdPath string) (major, minor uint32, ok bool)
}

// NewReader returns a Reader of the proc tree at root (DefaultProcRoot on
// a host; a container mounts the host's /proc elsewhere).
func NewReader(root string) *Reader {
	return &Reader{root: root, devOf: statDev}
}

// statDev stats what an fd link points to (the kernel resolves /proc fd
// links to the open file, across mount namespaces) and returns its
// numbers when it is a DRM or accel character device.
func statDev(fdPath string) (uint32, uint32, bool) {
	var st unix.Stat_t
	if err := unix.Stat(fdPath, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return 0, 0, false
	}
	major, minor := unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev))
	return major, minor, major == MajorDRM || major == MajorAccel
}

// Scan reads every process of the proc tree. A process that exits during
// the scan is left out; one that cannot be read is counted in
// Unreadable. Only an unreadable proc root is an error.
func (r *Reader) Scan() (*ScanResult, error) {
	dir, err := os.Open(r.root)
	if err != nil {
		return nil, err
	}
	names, err := dir.Readdirnames(-1)
	_ = dir.Close()
	if err != nil {
		return nil, err
	}
	res := &ScanResult{}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		res.Processes++
		r.process(res, pid)
	}
	return res, nil
}

// Process reads the DRM clients of one process into res.
func (r *Reader) process(res *ScanResult, pid int) {
	pdir := filepath.Join(r.root, strconv.Itoa(pid))
	fdDir := filepath.Join(pdir, "fd")
	d, err := os.Open(fdDir)
	if err != nil {
		res.unreadable(err)
		return
	}
	fds, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		res.unreadable(err)
		return
	}
	var found []Observation
	for _, name := range fds {
		fd, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		link := filepath.Join(fdDir, name)
		target, err := os.Readlink(link)
		if err != nil {
			if gone(err) {
				continue // this fd was closed since the listing
			}
			// Without ptrace read access (CAP_SYS_PTRACE) the fd list
			// is readable but no link is: the process is unreadable.
			res.unreadable(err)
			return
		}
		// Sockets, pipes and anon inodes ("socket:[123]") are most of a
		// busy process's fds; only a path can be a device node.
		if !strings.HasPrefix(target, "/") {
			continue
		}
		major, minor, ok := r.devOf(link)
		if !ok {
			continue
		}
		text, err := readLimited(filepath.Join(pdir, "fdinfo", name), maxFDInfo)
		if err != nil {
			res.unreadable(err)
			continue
		}
		info, err := ParseFDInfo(text)
		if err != nil {
			// A DRM node whose driver writes no usage stats (vkms,
			// virtio_gpu, simpledrm): nothing to report.
			continue
		}
		res.Malformed += info.Malformed
		found = append(found, Observation{PID: pid, FD: fd, Major: major, Minor: minor, Info: info})
	}
	if len(found) == 0 {
		return
	}
	comm, _ := readLimited(filepath.Join(pdir, "comm"), 256)
	cg, err := readLimited(filepath.Join(pdir, "cgroup"), 64<<10)
	if err != nil && gone(err) {
		return
	}
	owner := ParseCgroup(string(cg))
	for i := range found {
		found[i].Comm = strings.TrimSpace(string(comm))
		found[i].Owner = owner
	}
	res.Observations = append(res.Observations, found...)
}

// unreadable counts err unless it says the process is gone.
func (res *ScanResult) unreadable(err error) {
	if gone(err) {
		return
	}
	res.Unreadable++
	if len(res.Errors) < maxErrors {
		res.Errors = append(res.Errors, err)
	}
}

// gone reports an error of a process that exited while it was read.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH)
}

// readLimited reads at most limit bytes of path.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

func readlink(p string) (string, error) { return os.Readlink(p) }
