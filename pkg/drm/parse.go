package drm

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Sentinel errors wrapped by the parsers and by the entries of
// Inventory.Skipped, for errors.Is.
var (
	// ErrBadDev: a sysfs `dev` file does not hold "major:minor".
	ErrBadDev = errors.New("invalid major:minor")
	// ErrBadHexID: a PCI `vendor`/`device` file does not hold a 16-bit hex number.
	ErrBadHexID = errors.New("invalid PCI id")
	// ErrBadNUMA: a `numa_node` file does not hold an integer >= -1.
	ErrBadNUMA = errors.New("invalid NUMA node")
	// ErrBadLink: a symlink target has no usable last element.
	ErrBadLink = errors.New("invalid link target")
	// ErrOutsideRoot: a link leads out of the root it was found under.
	ErrOutsideRoot = errors.New("link leads outside the root")
	// ErrNodeMismatch: a device node is not a char device or has other
	// numbers than sysfs says.
	ErrNodeMismatch = errors.New("device node does not match sysfs")
	// ErrBadID: the card's stable ID is not a valid card ID.
	ErrBadID = errors.New("invalid card ID")
	// ErrDuplicateID: two cards have the same stable ID.
	ErrDuplicateID = errors.New("duplicate card ID")
	// ErrUnpaired: a DRM device has neither a card nor an accel node, a
	// render node without a card node, or more than one card, render or
	// accel node.
	ErrUnpaired = errors.New("cannot pair card and render node")
	// ErrSibling: the entry is fine, but another DRM entry of the same
	// device was skipped, so the card is left out as a whole.
	ErrSibling = errors.New("another entry of the same device was skipped")
	// ErrControlNode: a class/accel entry is a driver's control node
	// (habanalabs' accel_controlD<N>, with a dynamic major), not a
	// compute node. It is never advertised: it manages the device for
	// every user of it, so it is no part of what one container gets.
	ErrControlNode = errors.New("accel control node, not served")
)

// maxSysfsValue bounds what the parsers accept; sysfs attributes that
// discovery reads are a few bytes long.
const maxSysfsValue = 64

// trimValue removes the single trailing newline sysfs appends.
func trimValue(s string) string {
	return strings.TrimSuffix(s, "\n")
}

// quote shortens untrusted input for error messages.
func quote(s string) string {
	if len(s) > maxSysfsValue {
		s = s[:maxSysfsValue] + "..."
	}
	return strconv.Quote(s)
}

// parseUintStrict accepts only plain decimal digits (no sign, no spaces,
// no leading zeros except "0") that fit in 32 bits.
func parseUintStrict(s string) (uint32, bool) {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(n), true
}

// ParseDev parses the content of a sysfs `dev` file, "226:1\n".
func ParseDev(s string) (major, minor uint32, err error) {
	v := trimValue(s)
	a, b, ok := strings.Cut(v, ":")
	if ok {
		var okA, okB bool
		major, okA = parseUintStrict(a)
		minor, okB = parseUintStrict(b)
		if okA && okB {
			return major, minor, nil
		}
	}
	return 0, 0, fmt.Errorf("%w %s", ErrBadDev, quote(s))
}

// ParseHexID parses a sysfs PCI id file such as `vendor` ("0x8086\n") and
// returns four lowercase hex digits without 0x ("8086").
func ParseHexID(s string) (string, error) {
	v := trimValue(s)
	digits, ok := strings.CutPrefix(v, "0x")
	if !ok || digits == "" || len(digits) > 4 {
		return "", fmt.Errorf("%w %s", ErrBadHexID, quote(s))
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return "", fmt.Errorf("%w %s", ErrBadHexID, quote(s))
		}
	}
	n, err := strconv.ParseUint(digits, 16, 16)
	if err != nil {
		return "", fmt.Errorf("%w %s", ErrBadHexID, quote(s))
	}
	return fmt.Sprintf("%04x", n), nil
}

// ParseNUMANode parses a sysfs `numa_node` file ("-1\n", "0\n").
func ParseNUMANode(s string) (int, error) {
	v := trimValue(s)
	if v == "-1" {
		return -1, nil
	}
	n, ok := parseUintStrict(v)
	if !ok || n > 1<<16 {
		return 0, fmt.Errorf("%w %s", ErrBadNUMA, quote(s))
	}
	return int(n), nil
}

// LinkName returns the last element of a symlink target, e.g. "i915" for
// "../../../bus/pci/drivers/i915". It fails when the target has no usable
// last element ("", ".", "..", "/").
func LinkName(target string) (string, error) {
	if target == "" || strings.ContainsRune(target, 0) {
		return "", fmt.Errorf("%w %s", ErrBadLink, quote(target))
	}
	name := filepath.Base(filepath.Clean(target))
	if name == "." || name == ".." || name == "/" || name == "" {
		return "", fmt.Errorf("%w %s", ErrBadLink, quote(target))
	}
	return name, nil
}

// nodeKind tells card nodes from render nodes in class/drm, and compute
// from control nodes in class/accel.
type nodeKind int

const (
	kindOther nodeKind = iota
	kindCard
	kindRender
	kindAccel
	kindControl
)

// classifyEntry returns the kind of a class/drm entry name: "card<N>" and
// "renderD<N>" are nodes, everything else (connectors like card0-DP-1,
// version, controlD64, ...) is not.
func classifyEntry(name string) nodeKind {
	switch {
	case numbered(name, "renderD"):
		return kindRender
	case numbered(name, "card"):
		return kindCard
	}
	return kindOther
}

// classifyAccel returns the kind of a class/accel entry name: "accel<N>"
// is a compute node, "accel_controlD<N>" a control node, anything else
// is not a node.
func classifyAccel(name string) nodeKind {
	switch {
	case numbered(name, "accel_controlD"):
		return kindControl
	case numbered(name, "accel"):
		return kindAccel
	}
	return kindOther
}

// numbered reports whether name is prefix followed by a plain decimal
// number.
func numbered(name, prefix string) bool {
	n, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	_, ok = parseUintStrict(n)
	return ok
}

// isPCIAddress reports whether name looks like a PCI device address,
// DDDD:BB:DD.F (the domain may have more than four digits).
func isPCIAddress(name string) bool {
	dom, rest, ok := strings.Cut(name, ":")
	if !ok || len(dom) < 4 || len(dom) > 8 || !isLowerHex(dom) {
		return false
	}
	// rest = BB:DD.F
	if len(rest) != 7 || rest[2] != ':' || rest[5] != '.' {
		return false
	}
	if !isLowerHex(rest[0:2]) || !isLowerHex(rest[3:5]) {
		return false
	}
	return rest[6] >= '0' && rest[6] <= '7'
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return s != ""
}
