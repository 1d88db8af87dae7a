package doctor

import (
	"context"
	"fmt"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// Scope is a set of checks that a process can make from where it runs,
// for CheckScope. The daemons serve their scope on their metrics server
// (pkg/nodecheck), so that a node can be checked without a privileged
// debug pod: each sees only what its container mounts.
type Scope struct {
	// Name says who checked, e.g. "dri-cdi-agent"; it goes into the
	// report's Scope line.
	Name string
	// DevicePlugins checks the kubelet's device plugin socket.
	DevicePlugins bool
	// PodResources checks the kubelet's PodResources socket.
	PodResources bool
	// NRISocket checks that the NRI socket the plugin dials is a socket.
	NRISocket bool
	// Devices runs discovery of the DRM cards; CDICards then also compares
	// the cards with the spec devices.
	Devices bool
	// CDISpecs validates our CDI specs and compares their device nodes
	// with the host's.
	CDISpecs bool
	// NotChecked are the checks this place cannot make, and why; they go
	// into the report as they are.
	NotChecked []string
}

// CheckScope runs only the checks of s. It never reads the containerd
// config, whatever opts.ContainerdConfig says: a daemon serves this
// report on a port that the cluster's pods can reach, and the config can
// hold registry credentials.
func CheckScope(ctx context.Context, opts Options, s Scope) (*Report, error) {
	if s.Name == "" {
		return nil, fmt.Errorf("doctor scope: no name")
	}
	d := &doctor{opts: opts, ctx: ctx, root: newHostRoot(opts.Root)}
	d.rep.Delivery = opts.Delivery
	if s.DevicePlugins {
		d.checkDevicePluginDir()
	}
	if s.PodResources {
		d.checkPodResources()
	}
	if s.NRISocket {
		if err := isSocket(opts.NRISocket, d.host(opts.NRISocket)); err != nil {
			d.add("containerd.nri.socket", Fail, err.Error(), "check that containerd runs with NRI on and serves its socket there (dri-cdi doctor on the node reads the config)")
		} else {
			d.add("containerd.nri.socket", OK, opts.NRISocket+" is a socket", "")
		}
	}
	var cards []drm.Card
	if s.Devices {
		cards = d.checkDevices()
	}
	if s.CDISpecs {
		if devices, nodes, ok := d.checkSpecFiles(); ok {
			if s.Devices {
				d.checkSpecCards(cards, devices)
			}
			d.checkSpecNodes(nodes)
		}
	}
	d.rep.Scope = "checked by " + s.Name + " from its container"
	d.rep.NotChecked = append([]string(nil), s.NotChecked...)
	return &d.rep, nil
}
