package drm

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
)

// virtioDevice is the name the virtio bus gives a device, numbered in
// probe order (virtio0, virtio1, ...).
var virtioDevice = regexp.MustCompile(`^virtio[0-9]+$`)

// CharDeviceCard returns the card ID of the device the kernel registered
// as char major:minor, from <sysfs>/dev/char/<major>:<minor>, the link
// the kernel keeps for every char device it knows: a DRM minor's link
// names <parent device>/drm/<node>, and the parent is named as
// discovery names the card (the PCI or platform device; for virtio the
// transport device above virtioN). It reads one link and nothing else,
// so it is cheap enough for the container creation path; it reports the
// numbers a device holds now, whatever any spec file says. A numbers
// pair the kernel has no device for is an error wrapping fs.ErrNotExist.
func CharDeviceCard(sysfs string, major, minor uint32) (string, error) {
	link := filepath.Join(sysfs, "dev", "char", strconv.FormatUint(uint64(major), 10)+":"+strconv.FormatUint(uint64(minor), 10))
	target, err := os.Readlink(link)
	if err != nil {
		return "", fmt.Errorf("char device %d:%d: %w", major, minor, err)
	}
	target = path.Clean(filepath.ToSlash(target))
	node, class := path.Base(target), path.Base(path.Dir(target))
	if class != ClassDRM && class != ClassAccel {
		return "", fmt.Errorf("char device %d:%d is %s, not a DRM or accel node", major, minor, target)
	}
	if class == ClassAccel && classifyAccel(node) != kindAccel {
		// habanalabs' accel_controlD<N> sits in the accel class too;
		// discovery never serves it, so no card owns it.
		return "", fmt.Errorf("char device %d:%d is %s: %w", major, minor, target, ErrControlNode)
	}
	parent := path.Dir(path.Dir(target))
	id := path.Base(parent)
	if virtioDevice.MatchString(id) {
		id = path.Base(path.Dir(parent))
	}
	if id == "." || id == "/" || id == ".." || id == "devices" {
		return "", fmt.Errorf("char device %d:%d (%s): no parent device in %s", major, minor, node, target)
	}
	return id, nil
}
