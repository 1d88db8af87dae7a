package doctor

import (
	"fmt"
	"path/filepath"

	securejoin "github.com/cyphar/filepath-securejoin"
)

// hostRoot resolves host paths inside the directory where the host's
// filesystem is mounted (--host-root), the way the kernel would resolve
// them with that directory as "/". Without it, an absolute symlink on the
// host such as /var/run -> /run (Debian, Ubuntu) would be followed to this
// process's own /run, and doctor would check the debug pod instead of the
// node.
type hostRoot struct {
	// dir is the cleaned root; "" or "/" means this process runs on the
	// host itself and the kernel resolves every path already.
	dir string
}

func newHostRoot(dir string) hostRoot {
	if dir == "" || dir == "/" {
		return hostRoot{}
	}
	dir = filepath.Clean(dir)
	// securejoin wants a root without symlinks in it; a root that cannot
	// be resolved is kept as given and its lookups fail with its name.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return hostRoot{dir: dir}
}

// resolve returns where this process sees the host path p. Every symlink
// on the way, absolute or relative, is resolved inside the root and can
// never leave it: ".." stops at the root, and an absolute target starts
// again from the root. A component that does not exist ends the
// resolution; the rest is appended as is, so that a lookup of the result
// reports "does not exist".
func (r hostRoot) resolve(p string) (string, error) {
	if r.dir == "" {
		return p, nil
	}
	out, err := securejoin.SecureJoin(r.dir, p)
	if err != nil {
		return "", fmt.Errorf("resolve %s inside host root %s: %w", p, r.dir, err)
	}
	return out, nil
}

// HostPath returns where this process sees the host path p when the
// host's filesystem is mounted at root (--host-root; "" or "/" for the
// host itself), resolved as doctor resolves every path it checks. The CLI
// reads the dri-cdi config file (--config) through it.
func HostPath(root, p string) (string, error) {
	return newHostRoot(root).resolve(p)
}

// host maps the host path p to where this process sees it, resolved
// inside the host root. A path that cannot be resolved (a symlink loop, a
// directory it may not search) is reported once as a failed check, and
// maps to a name with a NUL byte in it, which every system call refuses
// (EINVAL), also after more components are joined to it: a check then
// fails rather than reading something outside the root or relative to
// the working directory.
func (d *doctor) host(p string) string {
	out, err := d.root.resolve(p)
	if err == nil {
		return out
	}
	if d.unresolved == nil {
		d.unresolved = map[string]bool{}
	}
	if !d.unresolved[p] {
		d.unresolved[p] = true
		d.add("host-root", Fail, err.Error(), "check the host path and the symlinks on it; --host-root must be where the host's / is mounted")
	}
	return unresolvable + p
}

// unresolvable prefixes the names host returns for unresolvable paths.
const unresolvable = "\x00unresolvable:"
