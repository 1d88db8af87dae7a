package dra

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// maxNameLen is the longest device name the API takes (a DNS label).
const maxNameLen = 63

var (
	// pciAddress is a card ID that is a PCI address in sysfs form.
	pciAddress = regexp.MustCompile(`^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$`)
	// dnsLabel is what resource.k8s.io accepts as a device name.
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// pciName and hashedName are the forms DeviceName produces for PCI
	// and for other IDs that are no label; an ID that already has one of
	// these forms is hashed too, so that it cannot take another card's
	// name.
	pciName    = regexp.MustCompile(`^pci-[0-9a-f]{4}-[0-9a-f]{2}-[0-9a-f]{2}-[0-7]$`)
	hashedName = regexp.MustCompile(`-x[0-9a-f]{8}$`)
)

// DeviceName maps a card's stable ID (pkg/drm) to its ResourceSlice
// device name, which must be a DNS label (lowercase alphanumerics and
// '-', at most 63 characters, alphanumeric at both ends). The mapping is
// a function of the ID alone, so a card keeps its name across restarts,
// rebinds and nodes:
//
//   - a PCI address DDDD:BB:DD.F becomes pci-DDDD-BB-DD-F
//     (0000:03:00.0 -> pci-0000-03-00-0);
//   - an ID that already is a DNS label and has neither of the two
//     generated forms stays as it is (vkms);
//   - any other ID is lowercased, every character outside [a-z0-9]
//     becomes '-', and "-x" plus the first 8 hex digits of the ID's
//     SHA-256 are appended, the readable part shortened to fit
//     (simple-framebuffer.0 -> simple-framebuffer-0-x<hash>).
//
// The three forms cannot produce each other's names, and within the
// third the hash tells apart IDs that read the same; the slice builder
// still refuses two cards with one name (see Build) rather than trust a
// 32-bit hash.
func DeviceName(id string) string {
	if m := pciAddress.FindStringSubmatch(id); m != nil {
		return "pci-" + m[1] + "-" + m[2] + "-" + m[3] + "-" + m[4]
	}
	if len(id) <= maxNameLen && dnsLabel.MatchString(id) && !pciName.MatchString(id) && !hashedName.MatchString(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	suffix := "-x" + hex.EncodeToString(sum[:4])
	var b strings.Builder
	for _, r := range strings.ToLower(id) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	readable := strings.Trim(b.String(), "-")
	if keep := maxNameLen - len(suffix); len(readable) > keep {
		readable = strings.TrimRight(readable[:keep], "-")
	}
	if readable == "" {
		return "card" + suffix
	}
	return readable + suffix
}
