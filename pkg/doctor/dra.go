package doctor

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/dpapi"
)

// checkDRA fails a node that serves our cards both through the device
// plugin and through DRA. dri-cdi-agent and dri-cdi-dra publish the same
// cards under the same resource names (a DeviceClass's
// extendedResourceName is the device plugin's resource name) and write the
// same CDI spec files: with both on one node the scheduler could hand one
// card to a device-plugin pod and to a DRA claim, and each would remove
// the other's spec files. The evidence is on the host: the agent's
// registration sockets in the kubelet's device-plugins dir
// (dpapi.SocketPrefix*.sock) and the DRA plugin's registration
// socket in plugins_registry (config.DRARegistrationSocket, or the
// rolling-update form "<driver>-<pod UID>-reg.sock").
func (d *doctor) checkDRA() {
	plugins := d.sockets(d.opts.KubeletDir, func(name string) bool {
		return strings.HasPrefix(name, dpapi.SocketPrefix) && strings.HasSuffix(name, ".sock")
	})
	dra := d.sockets(d.opts.PluginsRegistryDir, func(name string) bool {
		return name == config.DRARegistrationSocket ||
			strings.HasPrefix(name, config.DRADriver+"-") && strings.HasSuffix(name, "-reg.sock")
	})
	switch {
	case len(plugins) > 0 && len(dra) > 0:
		d.add("dra.one-mode", Fail, fmt.Sprintf(
			"the node serves the dri-cdi resources both through the device plugin (%s) and through DRA driver %s (%s): "+
				"one card could go to a device-plugin pod and a DRA claim at once",
			strings.Join(plugins, ", "), config.DRADriver, strings.Join(dra, ", ")),
			"run one of them on this node: the DRA DaemonSet on nodes labelled dri-cdi.dev/mode=dra, the device-plugin DaemonSet on the others "+
				"(deployments/kustomize/overlays/dra, Helm dra.enabled; see docs/dra.md, \"Migrating a node\")")
	case len(dra) > 0:
		d.add("dra.one-mode", OK, "DRA driver "+config.DRADriver+" registered ("+strings.Join(dra, ", ")+"), no dri-cdi device plugin", "")
	case len(plugins) > 0:
		d.add("dra.one-mode", OK, "dri-cdi device plugin ("+strings.Join(plugins, ", ")+"), no DRA driver "+config.DRADriver, "")
	default:
		d.add("dra.one-mode", OK, "neither the dri-cdi device plugin nor DRA driver "+config.DRADriver+" is registered on this node", "")
	}
}

// sockets lists the unix sockets in host dir whose names match, as host
// paths, sorted. A missing dir has none; other checks report it.
func (d *doctor) sockets(dir string, match func(string) bool) []string {
	entries, err := os.ReadDir(d.host(dir))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.Type()&fs.ModeSocket != 0 && match(e.Name()) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out
}
