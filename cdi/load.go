package cdi

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"sort"

	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// LoadDevices reads the spec files of kind in dir and returns, for each
// device name (card IDs and AllDevice), its device nodes in file order.
//
// The contract, for callers that must keep serving through bad input:
//
//   - Only files a Writer for kind owns are read: "<prefix>*.yaml" (or
//     .json) in dir itself (no subdirectories), as Scan with OnlyKind
//     selects them. Of those, a file whose kind is another kind is
//     skipped silently; it belongs to that kind.
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
	res, err := Scan([]string{dir}, OnlyKind(kind))
	if err != nil {
		return nil, err
	}
	if err := res.Dirs[0].Err; err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return map[string][]drm.DeviceNode{}, nil
		}
		return nil, err
	}

	devices := map[string][]drm.DeviceNode{}
	var errs []error
	for _, f := range res.Files {
		if errors.Is(f.Err, ErrOtherKind) {
			continue
		}
		if f.Err != nil {
			errs = append(errs, f.Err)
			continue
		}
		got, err := specDevices(f.Spec.Spec)
		if err != nil {
			errs = append(errs, &SpecError{Path: f.Path, Err: err})
			continue
		}
		maps.Copy(devices, got)
	}
	for _, d := range res.Duplicates {
		delete(devices, d.Device)
		for _, f := range d.Files[1:] {
			errs = append(errs, &SpecError{Path: f, Err: fmt.Errorf("device %q is also defined in %s; ignoring every definition", d.Device, d.Files[0])})
		}
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return devices, errors.Join(errs...)
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
