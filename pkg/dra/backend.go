package dra

import "github.com/dri-cdi/dri-cdi/pkg/agent"

var (
	_ agent.Backend       = (*Driver)(nil)
	_ agent.InUseReporter = (*Driver)(nil)
)

// HostDirs is the kubelet's plugin registration directory
// (agent.Backend): without it the kubelet never learns about the plugin.
func (d *Driver) HostDirs() []agent.HostDir {
	return []agent.HostDir{{Path: d.opts.RegistrarDir,
		Missing: "the kubelet's plugin registration directory is missing, so the plugin cannot register"}}
}
