package drm

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// maxLinks is the most symlinks one resolution follows, as Linux's
// MAXSYMLINKS.
const maxLinks = 40

// resolver follows symlinks like filepath.EvalSymlinks, but remembers
// every directory entry it has resolved. Sysfs paths of one node share
// long prefixes (/sys/devices/pci0000:00/...), so one discovery pass
// looks each of them up once instead of once per path. A resolver lives
// for one pass: the tree may change between passes.
type resolver struct {
	// cache maps "<resolved dir>/<name>" to what that entry resolves to.
	cache map[string]resolved
}

// resolved is what a directory entry resolves to.
type resolved struct {
	path string
	// dir tells whether a "/" may follow: after anything else the
	// kernel, and filepath.EvalSymlinks, fail with ENOTDIR.
	dir bool
}

func newResolver() *resolver {
	return &resolver{cache: make(map[string]resolved, 256)}
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
	return e.path, err
}

func (r *resolver) walk(path string, links *int) (resolved, error) {
	cur := resolved{path: "/", dir: true}
	rest := path
	for rest != "" {
		var (
			comp string
			more bool // a "/" follows comp
		)
		comp, rest, more = strings.Cut(rest, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			cur = resolved{path: parentDir(cur.path), dir: true}
			continue
		}
		next := joinPath(cur.path, comp)
		e, ok := r.cache[next]
		if !ok {
			var err error
			if e, err = r.lookup(next, cur.path, links); err != nil {
				return resolved{}, err
			}
			r.cache[next] = e
		}
		if more && !e.dir {
			return resolved{}, &fs.PathError{Op: "resolve", Path: next, Err: syscall.ENOTDIR}
		}
		cur = e
	}
	return cur, nil
}

// lookup resolves the entry next of the resolved directory dir.
func (r *resolver) lookup(next, dir string, links *int) (resolved, error) {
	fi, err := os.Lstat(next)
	if err != nil {
		return resolved{}, err
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return resolved{path: next, dir: fi.IsDir()}, nil
	}
	*links++
	if *links > maxLinks {
		return resolved{}, fmt.Errorf("%w: more than %d", syscall.ELOOP, maxLinks)
	}
	target, err := os.Readlink(next)
	if err != nil {
		return resolved{}, err
	}
	if !strings.HasPrefix(target, "/") {
		target = joinPath(dir, target)
	}
	return r.walk(target, links)
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
