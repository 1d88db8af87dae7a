package doctor

import "fmt"

// checkVersion says what the containerd release means for dri-cdi: which
// of NRI and CDI it has and has on by default, and what the NRI plugin can
// check there. It returns false when the release has no NRI at all.
func (d *doctor) checkVersion(ver semver) bool {
	if !ver.known() {
		return true
	}
	v := fmt.Sprintf("containerd %d.%d", ver.major, ver.minor)
	switch {
	case !ver.atLeast(1, 7):
		status := Warn
		if d.opts.Delivery != DeliveryDeviceSpecs {
			status = Fail
		}
		d.add("containerd.version", status, v+" has no NRI (1.7 added it): only device-specs delivery works",
			"upgrade containerd to 1.7 or later, or deploy with --delivery device-specs (kustomize overlay device-specs)")
		return false
	case !ver.atLeast(2, 0):
		d.add("containerd.version", OK, v+": NRI and CDI are off by default; run dri-cdi in nri mode with NRI enabled "+
			"(disable = false under [plugins.\"io.containerd.nri.v1.nri\"]). Its NRI passes neither the container's user nor its CDI names: "+
			"nodes the plugin adds are owned by root with the host node's group, so a pod that starts non-root needs that group in supplementalGroups", "")
	case !ver.atLeast(2, 3):
		d.add("containerd.version", OK, v+": NRI and CDI are on by default (cdi-cri mode); NRI does not pass the CDI names it resolved "+
			"(Container.CDIDevices came with 2.3), so the plugin confirms every allocation but cannot tell which nodes CDI injected", "")
	default:
		d.add("containerd.version", OK, v+": NRI and CDI are on by default (cdi-cri mode), and NRI passes the resolved CDI names for the plugin to check", "")
	}
	return true
}
