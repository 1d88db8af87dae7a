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
	cache map[string]string
}

func newResolver() *resolver {
	return &resolver{cache: make(map[string]string, 256)}
}

// resolve returns the absolute path with every symlink in it followed.
// ".." after a symlink steps out of the symlink's target, as the kernel
// does. Errors of missing entries are *fs.PathError naming the entry;
// too many links wrap syscall.ELOOP.
func (r *resolver) resolve(path string) (string, error) {
	if !strings.HasPrefix(path, "/") {
		return "", &fs.PathError{Op: "resolve", Path: path, Err: fs.ErrInvalid}
	}
	links := 0
	return r.walk(path, &links)
}

func (r *resolver) walk(path string, links *int) (string, error) {
	cur := "/"
	rest := path
	for rest != "" {
		var comp string
		comp, rest, _ = strings.Cut(rest, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			cur = parentDir(cur)
			continue
		}
		next := joinPath(cur, comp)
		if v, ok := r.cache[next]; ok {
			cur = v
			continue
		}
		fi, err := os.Lstat(next)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			r.cache[next] = next
			cur = next
			continue
		}
		*links++
		if *links > maxLinks {
			return "", fmt.Errorf("%w: more than %d", syscall.ELOOP, maxLinks)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if !strings.HasPrefix(target, "/") {
			target = joinPath(cur, target)
		}
		res, err := r.walk(target, links)
		if err != nil {
			return "", err
		}
		r.cache[next] = res
		cur = res
	}
	return cur, nil
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
