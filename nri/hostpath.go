package nri

import (
	"path"
	"strings"

	"github.com/containerd/nri/pkg/api"
)

// Where DRM nodes (driDir) and accel nodes (accelDir) live, on the host
// and in containers.
const (
	driDir   = "/dev/dri"
	accelDir = "/dev/accel"
)

// driMounts returns the mounts of c whose host source or container
// destination is /dev/dri or /dev/accel or below them, as
// "source:destination". A container whose device cgroup allows every
// device (privileged) can use such a mount, so it gets none.
func driMounts(c *api.Container) []string {
	var out []string
	for _, m := range c.GetMounts() {
		if underNodeDir(m.GetSource()) || underNodeDir(m.GetDestination()) {
			out = append(out, m.GetSource()+":"+m.GetDestination())
		}
	}
	if len(out) == 0 || allDevicesAllowed(c) {
		return nil
	}
	return out
}

// underNodeDir reports whether p is /dev/dri or /dev/accel or below one
// of them: where a device's own nodes are.
func underNodeDir(p string) bool {
	if p == "" {
		return false
	}
	p = path.Clean(p)
	for _, dir := range [...]string{driDir, accelDir} {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// allDevicesAllowed reports whether the container's device cgroup has a
// rule allowing every device, as privileged containers do.
func allDevicesAllowed(c *api.Container) bool {
	for _, r := range c.GetLinux().GetResources().GetDevices() {
		if r.GetAllow() && (r.GetType() == "" || r.GetType() == "a") && r.GetMajor() == nil && r.GetMinor() == nil &&
			strings.Contains(r.GetAccess(), "r") && strings.Contains(r.GetAccess(), "w") {
			return true
		}
	}
	return false
}
