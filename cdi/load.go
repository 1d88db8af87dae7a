package cdi

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"
	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// ErrInvalidSpec is wrapped by LoadDevices errors about one spec file.
var ErrInvalidSpec = errors.New("invalid CDI spec file")

// LoadDevices reads the spec files of kind in dir and returns, for each
// device name (card IDs and AllDevice), its device nodes in file order.
//
// The contract, for callers that must keep serving through bad input:
//
//   - Only files a Writer for kind owns are read: "<prefix>*.yaml" in dir
//     itself (no subdirectories). Of those, a file whose kind is another
//     kind is skipped silently; it belongs to that kind.
//   - A missing dir yields an empty map and no error: nothing has been
//     written yet. Any other failure to list dir yields a nil map and an
//     error naming dir.
//   - Each file is loaded with the CDI library's ReadSpec, the same parse
//     and validation a runtime applies. A file that fails, or holds a
//     device LoadDevices cannot use (a node without a major number, or
//     numbers beyond 32 bits), contributes nothing and adds one error
//     wrapping ErrInvalidSpec that names the file and the reason.
//   - A device name defined by two files is dropped, with an error naming
//     both files: a runtime's CDI cache drops such a device too, so
//     serving it would diverge from what the runtime injects.
//   - The returned map holds every device of every good file, and the
//     error joins all per-file errors (errors.Join); a non-nil error does
//     not mean the map is empty. Devices are never partially returned.
//
// Mode, UID and GID of a node are zero unless the spec sets fileMode, uid
// and gid; specs from Generate set none of them. HostPath defaults to
// Path when the spec leaves it empty, as in the CDI library.
func LoadDevices(dir, kind string) (map[string][]drm.DeviceNode, error) {
	prefix, err := FilePrefix(kind)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string][]drm.DeviceNode{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list CDI spec dir %s: %w", dir, err)
	}

	devices := map[string][]drm.DeviceNode{}
	source := map[string]string{} // device name -> file
	dropped := map[string]bool{}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, FileExt) {
			continue
		}
		path := filepath.Join(dir, name)
		spec, err := ReadSpec(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if spec.Kind != kind {
			continue
		}
		got, err := specDevices(spec.Spec)
		if err != nil {
			errs = append(errs, &SpecError{Path: path, Err: err})
			continue
		}
		for dev, nodes := range got {
			if dropped[dev] {
				errs = append(errs, &SpecError{Path: path, Err: fmt.Errorf("device %q is also defined in another file", dev)})
				continue
			}
			if other, dup := source[dev]; dup {
				errs = append(errs, &SpecError{Path: path, Err: fmt.Errorf("device %q is also defined in %s; ignoring both", dev, other)})
				delete(devices, dev)
				dropped[dev] = true
				continue
			}
			source[dev] = path
			devices[dev] = nodes
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return devices, errors.Join(errs...)
}

// SpecError is an error about one spec file. Its message names the file
// and fits on one line; it wraps ErrInvalidSpec and the cause.
type SpecError struct {
	// Path is the spec file.
	Path string
	// Err is the reason.
	Err error
}

// Error returns "invalid CDI spec file <path>: <reason>" on one line.
func (e *SpecError) Error() string {
	msg := e.Err.Error()
	// The library's own messages repeat the quoted path; once is enough.
	msg = strings.ReplaceAll(msg, " "+strconv.Quote(e.Path), "")
	msg = strings.Join(strings.Fields(msg), " ")
	return ErrInvalidSpec.Error() + " " + e.Path + ": " + msg
}

// Unwrap returns ErrInvalidSpec and the cause.
func (e *SpecError) Unwrap() []error { return []error{ErrInvalidSpec, e.Err} }

// ReadSpec loads one spec file with the CDI library's ReadSpec, the
// strict parse and validation a runtime's CDI cache applies to every
// file. A missing file gives an error wrapping fs.ErrNotExist; any other
// failure a *SpecError.
func ReadSpec(path string) (*cdilib.Spec, error) {
	spec, err := cdilib.ReadSpec(path, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read CDI spec %s: %w", path, err)
	}
	if err != nil {
		return nil, &SpecError{Path: path, Err: err}
	}
	return spec, nil
}

// specDevices converts every device of a validated spec, or fails as a
// whole so that a file never yields half its devices.
func specDevices(spec *specs.Spec) (map[string][]drm.DeviceNode, error) {
	out := make(map[string][]drm.DeviceNode, len(spec.Devices))
	for _, d := range spec.Devices {
		nodes := make([]drm.DeviceNode, 0, len(d.ContainerEdits.DeviceNodes)+len(spec.ContainerEdits.DeviceNodes))
		// Spec-wide nodes apply to every device of the spec, as in
		// (*Cache).InjectDevices.
		for _, list := range [][]*specs.DeviceNode{spec.ContainerEdits.DeviceNodes, d.ContainerEdits.DeviceNodes} {
			for _, n := range list {
				dn, err := deviceNode(n)
				if err != nil {
					return nil, fmt.Errorf("device %q: %w", d.Name, err)
				}
				nodes = append(nodes, dn)
			}
		}
		out[d.Name] = nodes
	}
	return out, nil
}

func deviceNode(n *specs.DeviceNode) (drm.DeviceNode, error) {
	if n.Type != "" && n.Type != "c" {
		return drm.DeviceNode{}, fmt.Errorf("node %s: type %q is not a character device", n.Path, n.Type)
	}
	if n.Major <= 0 || n.Major > math.MaxUint32 || n.Minor < 0 || n.Minor > math.MaxUint32 {
		return drm.DeviceNode{}, fmt.Errorf("node %s: device number %d:%d is not a usable character device number", n.Path, n.Major, n.Minor)
	}
	dn := drm.DeviceNode{
		Path:     n.Path,
		HostPath: n.HostPath,
		Major:    uint32(n.Major),
		Minor:    uint32(n.Minor),
	}
	if dn.HostPath == "" {
		dn.HostPath = n.Path
	}
	if n.FileMode != nil {
		dn.Mode = *n.FileMode
	}
	if n.UID != nil {
		dn.UID = *n.UID
	}
	if n.GID != nil {
		dn.GID = *n.GID
	}
	return dn, nil
}
