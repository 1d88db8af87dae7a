package nri

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containerd/nri/pkg/api"
	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

var (
	// ErrCardUnavailable is wrapped when an allocated card has no device
	// nodes now: its driver unbound or its nodes are gone, and the numbers
	// it had may belong to another card.
	ErrCardUnavailable = errors.New("card unavailable")
	// ErrHostMismatch is wrapped when a node of an allocated card is not,
	// on the host at this moment, the device our CDI spec says it is.
	ErrHostMismatch = errors.New("device node does not match the host")
)

// refreshTimeout bounds the one reload of the spec index a missing card
// causes; the runtime waits for the answer (2 s NRI request timeout).
const refreshTimeout = 300 * time.Millisecond

// HostDevice is what a host path holds at this moment.
type HostDevice struct {
	// Char is true for a character device.
	Char bool
	// Major and Minor are its numbers (zero unless Char).
	Major, Minor uint32
}

// HostStat tells what device a host path holds now, following symlinks.
// It is called on the request path: one stat, no other I/O.
type HostStat func(path string) (HostDevice, error)

// StatHost is the HostStat of the running host: stat(2).
func StatHost(p string) (HostDevice, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return HostDevice{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return HostDevice{}, nil
	}
	rdev := uint64(st.Rdev) //nolint:unconvert // Rdev is narrower on some platforms
	return HostDevice{Char: true, Major: unix.Major(rdev), Minor: unix.Minor(rdev)}, nil
}

// CharOwner tells which card the kernel registered a char device number
// for, now (drm.CharDeviceCard over the host's sysfs). It is called on
// the request path: one readlink, no other I/O.
type CharOwner func(major, minor uint32) (card string, err error)

// SysfsOwner is the CharOwner of the host whose sysfs is mounted at
// sysfs.
func SysfsOwner(sysfs string) CharOwner {
	return func(major, minor uint32) (string, error) { return drm.CharDeviceCard(sysfs, major, minor) }
}

// refresher is a DeviceSource that can be reloaded on demand
// (*SpecIndex).
type refresher interface {
	Refresh(ctx context.Context) error
}

// checkedNodes returns, for every card, its nodes as our specs hold them,
// after checking each DRM or accel node (container path under /dev/dri or
// /dev/accel) against the host: the node's host path and, for
// a /dev/dri/by-path link, the host's link of that name must be a char
// device with the spec's numbers now. The link names the card's PCI or
// platform device, so it catches the case where the card node path and
// numbers are unchanged but belong to another card that took them.
//
// A card the source does not know is reloaded once (singleflight, so a
// burst of containers does one reload), then failed with ErrUnknownCard;
// a card without nodes, or named by an UnavailableEnv marker the
// runtime's CDI injection put into env, fails with ErrCardUnavailable; a
// node that does not match fails with ErrHostMismatch. What is returned
// is exactly what was checked, so nothing else can be injected.
func checkedNodes(ctx context.Context, cards []string, env []string, src DeviceSource, host hostCheck) (fixedSource, error) {
	for _, e := range env {
		if id, ok := cdi.UnavailableCard([]string{e}); ok {
			return nil, unavailable(id)
		}
	}
	out := make(fixedSource, len(cards))
	for _, card := range cards {
		nodes, ok := src.Nodes(card)
		if !ok {
			if r, can := src.(refresher); can {
				rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
				_ = r.Refresh(rctx) // a failed reload leaves the card unknown
				cancel()
				nodes, ok = src.Nodes(card)
			}
		}
		if !ok {
			return nil, fmt.Errorf("%w: card %s", ErrUnknownCard, card)
		}
		if len(nodes) == 0 {
			return nil, unavailable(card)
		}
		// Numbers whose owner was checked: the by-path links repeat them. A
		// card has at most three, so the slice stays on the stack.
		owned := make([]uint64, 0, 4)
		for _, n := range nodes {
			if !underNodeDir(n.Path) {
				// A companion node, which cards may share (/dev/kfd,
				// a SoC's codec): no card's identity; the agent checked
				// its subsystem when it wrote the spec.
				continue
			}
			if err := checkHost(card, n, host.stat); err != nil {
				return nil, err
			}
			if dev := uint64(n.Major)<<32 | uint64(n.Minor); !slices.Contains(owned, dev) {
				if err := host.checkOwner(card, n); err != nil {
					return nil, err
				}
				owned = append(owned, dev)
			}
		}
		out[card] = nodes
	}
	return out, nil
}

func unavailable(card string) error {
	return fmt.Errorf("%w: card %s is not bound to a driver or its device nodes are gone; "+
		"its device numbers may belong to another card now, so none is handed over (the container is retried and "+
		"gets the card once it is back)", ErrCardUnavailable, card)
}

// hostCheck is how the nodes of a card are compared with the host.
type hostCheck struct {
	stat HostStat
	// owner, when set, names the card the kernel registered each
	// node's numbers for.
	owner CharOwner
}

// checkOwner checks that the kernel registered the numbers of one node
// of card for this card now (after checkHost found the host path holding
// them). It needs no by-path link, so it also holds for a card without
// one, and for a spec that could not be rewritten after its card's
// numbers went to another card.
func (h hostCheck) checkOwner(card string, n drm.DeviceNode) error {
	if h.owner == nil {
		return nil
	}
	owner, err := h.owner(n.Major, n.Minor)
	switch {
	case err != nil:
		return fmt.Errorf("%w: card %s: node %s (%d:%d): %w", ErrHostMismatch, card, n.Path, n.Major, n.Minor, err)
	case owner != card:
		return fmt.Errorf("%w: card %s: node %s is %d:%d, which the kernel has registered for %s now (the card's "+
			"numbers were taken by another device; the CDI spec is stale)", ErrHostMismatch, card, n.Path, n.Major, n.Minor, owner)
	}
	return nil
}

// checkHost compares one node of card with what its host path holds.
func checkHost(card string, n drm.DeviceNode, stat HostStat) error {
	host := hostPathOf(n)
	d, err := stat(host)
	switch {
	case err != nil:
		return fmt.Errorf("%w: card %s: node %s: host %s: %w", ErrHostMismatch, card, n.Path, host, err)
	case !d.Char:
		return fmt.Errorf("%w: card %s: node %s: host %s is not a char device", ErrHostMismatch, card, n.Path, host)
	case d.Major != n.Major || d.Minor != n.Minor:
		return fmt.Errorf("%w: card %s: node %s should be %d:%d, but host %s is %d:%d now (the card's numbers were "+
			"taken by another device; the CDI spec is stale)", ErrHostMismatch, card, n.Path, n.Major, n.Minor, host, d.Major, d.Minor)
	}
	return nil
}

// byPathDir is where udev's by-path links are, in containers and on the
// host.
const byPathDir = driDir + "/by-path/"

// hostPathOf is the host path a node is checked at. For a by-path link
// the spec's hostPath is the card node it pointed to when the spec was
// written (see cdi.deviceNodes); the check follows the host's link of
// the same name instead, next to that node.
func hostPathOf(n drm.DeviceNode) string {
	host := n.HostPath
	if host == "" {
		host = n.Path
	}
	if name, ok := strings.CutPrefix(path.Clean(n.Path), byPathDir); ok && !strings.Contains(name, "/") {
		return filepath.Join(filepath.Dir(host), "by-path", name)
	}
	return host
}

// numberIndex is a DeviceSource that can name the card whose nodes have
// given numbers (*SpecIndex).
type numberIndex interface {
	CardOf(major, minor uint32) (string, bool)
}

// checkPresent checks the DRM nodes container c already has when the
// plugin sees it. The runtime's CDI injection ran first, from the
// runtime's own cache of our specs, which can be older than ours: a spec
// event it missed, or a spec the agent could not rewrite. Every char
// device under /dev/dri or /dev/accel whose numbers are none of the
// checked nodes of the cards allocated to c is looked up, in the
// kernel's record when the owner check is on, else in our specs. A node of a card not allocated
// to c fails it with ErrHostMismatch naming the node and that card.
// Numbers neither knows are no card of ours and are left alone. A
// container that may use every device (privileged) is not checked: it
// has every host node anyway.
func checkPresent(c *api.Container, checked fixedSource, host hostCheck, src DeviceSource) error {
	if allDevicesAllowed(c) {
		return nil
	}
	var allowed []uint64
	for _, nodes := range checked {
		for _, n := range nodes {
			allowed = append(allowed, uint64(n.Major)<<32|uint64(n.Minor))
		}
	}
	for _, d := range c.GetLinux().GetDevices() {
		if !isChar(d.GetType()) || !underNodeDir(d.GetPath()) || d.GetMajor() < 0 || d.GetMinor() < 0 {
			continue
		}
		major, minor := uint32(d.GetMajor()), uint32(d.GetMinor())
		if slices.Contains(allowed, uint64(major)<<32|uint64(minor)) {
			continue
		}
		card, known := "", false
		if host.owner != nil {
			if id, err := host.owner(major, minor); err == nil {
				card, known = id, true
			}
		} else if idx, ok := src.(numberIndex); ok {
			card, known = idx.CardOf(major, minor)
		}
		if _, mine := checked[card]; known && !mine {
			return fmt.Errorf("%w: the runtime gave the container %s (%d:%d), a node of card %s, which is not allocated "+
				"to it (the runtime's copy of the CDI specs is stale); allocated: %s",
				ErrHostMismatch, path.Clean(d.GetPath()), major, minor, card, strings.Join(slices.Sorted(maps.Keys(checked)), ", "))
		}
	}
	return nil
}

// fixedSource is a DeviceSource over nodes already checked.
type fixedSource map[string][]drm.DeviceNode

// Nodes returns the checked nodes of a card.
func (f fixedSource) Nodes(card string) ([]drm.DeviceNode, bool) {
	n, ok := f[card]
	return n, ok
}

// identityReason is the dri_cdi_nri_errors_total reason of a
// checkedNodes error.
func identityReason(err error) string {
	switch {
	case errors.Is(err, ErrCardUnavailable):
		return reasonCardUnavailable
	case errors.Is(err, ErrHostMismatch):
		return reasonHostMismatch
	}
	return reasonUnknownCard
}

// processEnv is the container's environment as the runtime built it
// (with the env of any CDI device it injected).
func processEnv(c *api.Container) []string { return c.GetEnv() }
