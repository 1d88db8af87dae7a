package drm

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxLinks is the most symlinks one resolution follows, as Linux's
// MAXSYMLINKS.
const maxLinks = 40

// resolver follows symlinks like filepath.EvalSymlinks, but remembers
// every directory entry it has resolved. Sysfs paths of one node share
// long prefixes (/sys/devices/pci0000:00/...), so one discovery pass
// looks each of them up once instead of once per path. A resolver lives
// for one pass: the tree may change between passes.
//
// Each entry costs one readlink(2): it returns the target of a symlink
// and EINVAL for anything else, so no lstat(2) is needed to tell them
// apart. Whether a non-link is a directory is learnt when a name is
// found in it, or, only where the walk needs it before any name follows
// (".", "..", a trailing "/"), from an lstat(2).
//
// A resolver made by newResolverAt also opens O_PATH descriptors of the
// directories it uses (see fdAfter), and asks for the entries
// of each relative to it (readlinkat, openat, fstatat), so
// the kernel walks one component instead of the whole path: on a VM,
// a lookup of a path twelve components deep costs about 1 us more than
// one of a single name. Its close must be called.
type resolver struct {
	// cache maps "<resolved dir>/<name>" to what that entry resolves
	// to. A link and its target share one *resolved, so what is learnt
	// about the target holds for the link too.
	cache  map[string]*resolved
	root   resolved
	buf    []byte // readlink and readAttr buffer
	useFD  bool
	fds    []int // descriptors to close
	maxFDs int   // most descriptors open at once
}

// maxFDs bounds the descriptors one pass holds (a pass of 16 cards opens
// about 66), so that a node with many cards does not take a daemon near
// its open file limit; past it, entries are asked for by path.
const maxFDs = 128

// fdAfter is how often a directory is used before a resolver made by
// newResolverAt opens it by its whole path: opening and closing cost
// about as much as two deep lookups save, so a directory used twice is
// not worth it, the class directory, a PCI bridge or a PCI function (six
// entries) are. Below a directory with a descriptor, opening one is a
// lookup of one name, and every directory gets one at its first use.
const fdAfter = 3

// isDir is what a resolver knows of an entry being a directory.
type isDir uint8

const (
	dirUnknown isDir = iota
	dirYes
	dirNo
)

// resolved is what a directory entry resolves to.
type resolved struct {
	path string
	// dir tells whether a "/" may follow: after anything else the
	// kernel, and filepath.EvalSymlinks, fail with ENOTDIR.
	dir isDir
	// uses counts the entries asked for in this directory, and fd is
	// its O_PATH descriptor once hasFD.
	uses  int
	fd    int
	hasFD bool
}

func newResolver() *resolver {
	return &resolver{
		cache: make(map[string]*resolved, 256),
		root:  resolved{path: "/", dir: dirYes},
		buf:   make([]byte, maxAttrSize),
	}
}

// newResolverAt is a resolver that asks relative to the descriptors of
// the directories it uses most; close releases them.
func newResolverAt() *resolver {
	r := newResolver()
	r.useFD, r.maxFDs = true, maxFDs
	return r
}

// close closes the directory descriptors the resolver opened.
func (r *resolver) close() {
	for _, fd := range r.fds {
		unix.Close(fd)
	}
	r.fds = nil
	// Every entry goes, not only those still holding a descriptor: a
	// closed descriptor's number may be reused by the next open. A
	// resolver used after close starts again from the paths.
	r.cache = make(map[string]*resolved)
}

// at returns a descriptor and a name by which *at system calls reach
// path: AT_FDCWD and path itself, or the descriptor of path's directory
// and path's last element. The directory must be resolved: the name is
// then looked up in the directory found before, not in whatever its
// path names now.
func (r *resolver) at(path string) (int, string) {
	if !r.useFD {
		return unix.AT_FDCWD, path
	}
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return unix.AT_FDCWD, path
	}
	dir, ok := r.cache[path[:i]]
	if !ok || dir.path != path[:i] {
		return unix.AT_FDCWD, path
	}
	return r.atDir(dir, path)
}

// atDir is at for a path in the resolved directory dir.
func (r *resolver) atDir(dir *resolved, path string) (int, string) {
	if !r.useFD || dir == &r.root {
		return unix.AT_FDCWD, path
	}
	if !dir.hasFD {
		dir.uses++
		pfd, pname, ok := r.parentFD(dir)
		if dir.uses < fdAfter && !ok || len(r.fds) >= r.maxFDs {
			return unix.AT_FDCWD, path
		}
		fd, err := openDir(pfd, pname)
		if err != nil {
			// Ask by path, as without descriptors; do not try again.
			dir.uses = -1 << 30
			return unix.AT_FDCWD, path
		}
		dir.fd, dir.hasFD = fd, true
		r.fds = append(r.fds, fd)
	}
	return dir.fd, path[len(dir.path)+1:]
}

// parentFD returns a descriptor and a name by which the resolved
// directory dir is opened: its parent's descriptor and its name when the
// parent has one (ok), else AT_FDCWD and its path. Below a directory
// with a descriptor, opening one costs a lookup of a single name, so
// every directory there gets one at its first use.
func (r *resolver) parentFD(dir *resolved) (int, string, bool) {
	if p := parentDir(dir.path); p != "/" {
		if pe, ok := r.cache[p]; ok && pe.path == p && pe.hasFD {
			return pe.fd, dir.path[len(p)+1:], true
		}
	}
	return unix.AT_FDCWD, dir.path, false
}

// openDir opens name in dirfd with O_PATH. O_NOFOLLOW|O_DIRECTORY: what
// was found to be a directory and no symlink must still be one.
func openDir(dirfd int, name string) (int, error) {
	for {
		d, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return d, err
		}
	}
}

// resolve returns the absolute path with every symlink in it followed.
// ".." after a symlink steps out of the symlink's target, as the kernel
// does. Errors of missing entries, and ENOTDIR for a "/" after a
// non-directory, are *fs.PathError naming the entry;
// too many links wrap syscall.ELOOP.
func (r *resolver) resolve(path string) (string, error) {
	if !strings.HasPrefix(path, "/") {
		return "", &fs.PathError{Op: "resolve", Path: path, Err: fs.ErrInvalid}
	}
	links := 0
	e, err := r.walk(path, &links)
	if err != nil {
		return "", err
	}
	return e.path, nil
}

// known records that path, already resolved, is no symlink, and whether
// it is a directory, so that a later walk through it asks the kernel
// nothing. The caller has just looked at the entry itself (an lstat(2)
// of a device node, say).
func (r *resolver) known(path string, dir bool) {
	e := &resolved{path: path, dir: dirNo}
	if dir {
		e.dir = dirYes
	}
	r.cache[path] = e
}

// walk resolves the absolute path. It starts after the longest prefix
// the cache knows to be symlink-free, and names entries by substrings
// of path while the part walked so far resolved to itself, so that most
// lookups of a pass neither build a string nor ask the kernel.
func (r *resolver) walk(path string, links *int) (*resolved, error) {
	cur, i := r.cachedPrefix(path)
	if i > 0 && i < len(path) {
		// path[i] is a "/".
		if err := r.mustBeDir(cur, path[:i], path[i+1:]); err != nil {
			return nil, err
		}
	}
	rest := path[i:]
	for rest != "" {
		var (
			comp string
			more bool // a "/" follows comp
		)
		at := len(path) - len(rest) // where comp starts in path
		comp, rest, more = strings.Cut(rest, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			cur = r.parent(cur)
			continue
		}
		var next string
		if r.resolvesToItself(cur, path, at) {
			next = path[:at+len(comp)]
		} else {
			next = joinPath(cur.path, comp)
		}
		e, ok := r.cache[next]
		if !ok {
			var err error
			if e, err = r.lookup(next, cur, links); err != nil {
				return nil, err
			}
			r.cache[next] = e
		}
		if more {
			if err := r.mustBeDir(e, next, rest); err != nil {
				return nil, err
			}
		}
		cur = e
	}
	return cur, nil
}

// cachedPrefix returns the longest prefix path[:i] of path, ending at a
// "/" or at the end, that is a key of the cache, and its entry; or the
// root and 0. A key is "<resolved dir>/<name>", and a resolved directory
// resolves to itself, so the entry is what walking path[:i] would give.
func (r *resolver) cachedPrefix(path string) (*resolved, int) {
	for i := len(path); i > 1; {
		if e, ok := r.cache[path[:i]]; ok {
			return e, i
		}
		j := strings.LastIndexByte(path[:i], '/')
		if j <= 0 {
			break
		}
		i = j
	}
	return &r.root, 0
}

// resolvesToItself reports whether path[:at] is cur.path followed by a
// "/": then the entry at path[at:] is named by a substring of path.
func (r *resolver) resolvesToItself(cur *resolved, path string, at int) bool {
	if cur == &r.root {
		return at == 1
	}
	return at == len(cur.path)+1 && path[:at-1] == cur.path
}

// parent is the resolved parent of the resolved directory cur.
func (r *resolver) parent(cur *resolved) *resolved {
	p := parentDir(cur.path)
	if p == "/" {
		return &r.root
	}
	// Every resolved path is cached under its own name: it was the
	// "<dir>/<name>" of its last lookup.
	if e, ok := r.cache[p]; ok && e.path == p {
		e.dir = dirYes
		return e
	}
	e := &resolved{path: p, dir: dirYes}
	r.cache[p] = e
	return e
}

// mustBeDir fails with ENOTDIR, naming the entry next, when e, followed
// by a "/" and rest, is no directory. When a name follows, the kernel
// checks that when it looks the name up; when only ".", ".." or nothing
// follows, e is looked at now.
func (r *resolver) mustBeDir(e *resolved, next, rest string) error {
	if e.dir == dirUnknown && !nameFollows(rest) {
		var st unix.Stat_t
		if err := lstat(e.path, &st); err != nil {
			return &fs.PathError{Op: "lstat", Path: e.path, Err: err}
		}
		e.dir = dirNo
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			e.dir = dirYes
		}
	}
	if e.dir == dirNo {
		return &fs.PathError{Op: "resolve", Path: next, Err: syscall.ENOTDIR}
	}
	return nil
}

// nameFollows reports whether the first component of rest other than
// "" and "." is a name (not "..").
func nameFollows(rest string) bool {
	for rest != "" {
		var comp string
		comp, rest, _ = strings.Cut(rest, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			return false
		}
		return true
	}
	return false
}

// lookup resolves the entry next of the resolved directory dir.
func (r *resolver) lookup(next string, dir *resolved, links *int) (*resolved, error) {
	fd, name := r.atDir(dir, next)
	target, err := r.readlinkAt(fd, name)
	if errors.Is(err, unix.EINVAL) {
		// Not a symlink, but found: dir is a directory.
		dir.dir = dirYes
		return &resolved{path: next}, nil
	}
	if err != nil {
		return nil, &fs.PathError{Op: "readlink", Path: next, Err: err}
	}
	dir.dir = dirYes
	*links++
	if *links > maxLinks {
		return nil, fmt.Errorf("%w: more than %d", syscall.ELOOP, maxLinks)
	}
	if !strings.HasPrefix(target, "/") {
		target = joinTarget(dir.path, target)
	}
	return r.walk(target, links)
}

// readlink returns the target of the symlink path, whose directory is
// resolved.
func (r *resolver) readlink(path string) (string, error) {
	fd, name := r.at(path)
	return r.readlinkAt(fd, name)
}

// readlinkAt is readlinkat(2) with a buffer that grows as needed and is
// kept for the next call.
func (r *resolver) readlinkAt(fd int, name string) (string, error) {
	for {
		n, err := unix.Readlinkat(fd, name, r.buf)
		for err == unix.EINTR {
			n, err = unix.Readlinkat(fd, name, r.buf)
		}
		if err != nil {
			return "", err
		}
		if n < len(r.buf) {
			return string(r.buf[:n]), nil
		}
		if len(r.buf) >= unix.PathMax {
			return "", unix.ENAMETOOLONG
		}
		r.buf = make([]byte, 2*len(r.buf))
	}
}

// lstat is unix.Lstat, retried when a signal interrupts it.
func lstat(path string, st *unix.Stat_t) error {
	for {
		if err := unix.Lstat(path, st); err != unix.EINTR {
			return err
		}
	}
}

// joinTarget is the path of the relative symlink target in the resolved
// directory dir. Its leading ".." are folded into dir: the parent of a
// resolved directory is its lexical parent. Any later ".." is left to
// the walk, which must resolve what comes before it first.
func joinTarget(dir, target string) string {
	for {
		switch {
		case target == "..":
			return parentDir(dir)
		case strings.HasPrefix(target, "../"):
			dir, target = parentDir(dir), target[3:]
		default:
			return joinPath(dir, target)
		}
	}
}

// joinPath appends name to the absolute, clean dir without cleaning
// name: ".." in it must be walked, not folded away.
func joinPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// parentDir is the parent of an absolute, clean, resolved path.
func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}
