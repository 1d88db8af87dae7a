package nri

import (
	"path"
	"strings"

	"github.com/containerd/nri/pkg/api"
)

// driDir is where DRM nodes live, on the host and in containers.
const driDir = "/dev/dri"

// driMounts returns the mounts of c whose host source or container
// destination is /dev/dri or below it, as "source:destination". A
// container whose device cgroup allows every device (privileged) can use
// such a mount, so it gets none.
func driMounts(c *api.Container) []string {
	var out []string
	for _, m := range c.GetMounts() {
		if underDRI(m.GetSource()) || underDRI(m.GetDestination()) {
			out = append(out, m.GetSource()+":"+m.GetDestination())
		}
	}
	if len(out) == 0 || allDevicesAllowed(c) {
		return nil
	}
	return out
}

func underDRI(p string) bool {
	if p == "" {
		return false
	}
	p = path.Clean(p)
	return p == driDir || strings.HasPrefix(p, driDir+"/")
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
