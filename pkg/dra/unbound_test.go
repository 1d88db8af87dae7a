package dra

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"github.com/stretchr/testify/require"
	healthpb "k8s.io/kubelet/pkg/apis/dra-health/v1"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// healthOf is the first health report d sends, by device name.
func healthOf(t *testing.T, d *Driver) map[string]*healthpb.DeviceHealth {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var r *healthpb.NodeWatchResourcesResponse
	stop := errors.New("got one")
	err := d.watchHealth(ctx, func(first *healthpb.NodeWatchResourcesResponse) error { r = first; return stop })
	require.ErrorIs(t, err, stop)
	out := map[string]*healthpb.DeviceHealth{}
	for _, h := range r.Devices {
		out[h.Device.DeviceName] = h
	}
	return out
}

// specNodes returns the device nodes the CDI specs in dir give card id,
// and whether they define it at all.
func specNodes(t *testing.T, dir, id string) ([]drm.DeviceNode, bool) {
	t.Helper()
	devs, err := cdi.LoadDevices(dir, cdi.DefaultKind)
	require.NoError(t, err)
	nodes, ok := devs[id]
	return nodes, ok
}

// A card a prepared claim holds that is unbound when the plugin restarts
// stays in the slice, tainted, as if the plugin had watched the unbind:
// the health report says Unhealthy, a new claim for it is refused, its
// spec keeps its CDI name without a device node; when it binds again it
// is healthy with its own nodes.
func TestRestartKeepsTheUnboundCardOfAPreparedClaim(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	tree := drmtest.MustBuild(t, hybrid...)
	cdiDir, data, reg, client := t.TempDir(), kubelettest.ShortDir(t), kubelettest.ShortDir(t), fakeClient()
	const amd, amdDev = "0000:03:00.0", "pci-0000-03-00-0"

	p := runPlugin(t, tree, cdiDir, data, reg, client)
	e := p.register(t, client)
	require.Eventually(t, func() bool { return len(devicesOf(t, e)) == 2 }, 30*time.Second, time.Millisecond)
	held := e.claim("held", "uid-held", result("gpu", amdDev))
	first := e.prepare(held)
	require.Empty(t, first["uid-held"].Error)
	e.plugin.Close()
	p.stop()

	require.NoError(t, tree.Unbind(amd))
	p = runPlugin(t, tree, cdiDir, data, reg, client)
	e = p.register(t, client)

	tainted := []draapi.DeviceTaint{{Key: UnavailableTaint, Value: UnavailableReason, Effect: draapi.DeviceTaintEffectNoSchedule}}
	// The slice of the first run is still there, untainted, until the
	// second run's reaches the (fake) API server.
	require.Eventually(t, func() bool {
		devs := devicesOf(t, e)
		return len(devs) == 2 && len(devs[amdDev].Taints) == 1
	}, 30*time.Second, time.Millisecond)
	dev := devicesOf(t, e)[amdDev]
	require.Equal(t, tainted, dev.Taints)
	require.Equal(t, amd, *dev.Attributes[AttrID].StringValue)
	require.Equal(t, "dri-cdi.dev/amdgpu", *dev.Attributes[AttrResource].StringValue, "the resource recorded at prepare")
	require.NotContains(t, dev.Attributes, AttrRenderMinor, "an unbound card has no minor to publish")
	health := healthOf(t, p.d)
	require.Equal(t, healthpb.HealthStatus_UNHEALTHY, health[amdDev].Health)
	require.Contains(t, health[amdDev].Message, "card unavailable")
	require.Equal(t, healthpb.HealthStatus_HEALTHY, health["pci-0000-00-02-0"].Health)

	other := e.claim("other", "uid-other", result("gpu", amdDev))
	require.Contains(t, e.prepare(other)["uid-other"].Error, "card unavailable")
	again := e.prepare(held)
	require.Equal(t, cdiIDs(first["uid-held"]), cdiIDs(again["uid-held"]), "a prepared claim keeps its answer")
	nodes, ok := specNodes(t, cdiDir, amd)
	require.True(t, ok, "the held card's CDI name must keep resolving")
	require.Empty(t, nodes, "to no device node: its numbers may be another card's now")

	// Bound again: healthy, with its own nodes.
	require.NoError(t, tree.Rebind(amd))
	require.Eventually(t, func() bool {
		dev, ok := devicesOf(t, e)[amdDev]
		return ok && len(dev.Taints) == 0
	}, 30*time.Second, time.Millisecond)
	require.Equal(t, healthpb.HealthStatus_HEALTHY, healthOf(t, p.d)[amdDev].Health)
	nodes, _ = specNodes(t, cdiDir, amd)
	var paths []string
	for _, n := range nodes {
		paths = append(paths, n.Path)
	}
	require.Contains(t, paths, "/dev/dri/renderD129")
	require.Contains(t, e.prepare(other)["uid-other"].Error, "card is prepared for another claim")
	e.unprepare(held)
	require.Empty(t, e.prepare(other)["uid-other"].Error)
}
