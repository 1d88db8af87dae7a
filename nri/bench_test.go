package nri_test

import (
	"context"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
)

// benchPlugin is a plugin over the test specs that answers every
// container with cardA and checks nodes with the fake host.
func benchPlugin(b *testing.B) *nri.Plugin {
	b.Helper()
	return benchPluginOn(b, b.TempDir(), func(string, string) (map[string][]drm.DeviceNode, error) { return specs, nil },
		podresourcestest.Fixed{resI915: {cardA}}, specHost.stat)
}

// benchPluginOn is a plugin that loads the specs in dir with load,
// answers every container with alloc, and checks nodes with hostStat
// (nil: the real host), logging only warnings.
func benchPluginOn(b *testing.B, dir string, load nri.LoadFunc, alloc podresourcestest.Fixed, hostStat nri.HostStat) *nri.Plugin {
	b.Helper()
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	store := nri.NewSpecIndex(dir, kind, load, nil, logrus.NewEntry(log))
	require.NoError(b, store.Reload())
	p, err := nri.New(nri.Config{
		Kind: kind, Resources: served{resI915: true}, Authorizer: alloc,
		Devices: store, Log: logrus.NewEntry(log), HostStat: hostStat,
	})
	require.NoError(b, err)
	return p
}

// plainContainer looks like what containerd passes for an ordinary pod
// container: a dozen annotations, a few mounts, no devices.
func plainContainer() *api.Container {
	c := container("app")
	for _, k := range []string{
		"io.kubernetes.container.hash", "io.kubernetes.container.restartCount",
		"io.kubernetes.container.terminationMessagePath", "io.kubernetes.container.terminationMessagePolicy",
		"io.kubernetes.pod.terminationGracePeriod", "io.kubernetes.cri.container-type",
		"io.kubernetes.cri.container-name", "io.kubernetes.cri.image-name",
		"io.kubernetes.cri.sandbox-id", "io.kubernetes.cri.sandbox-name",
		"io.kubernetes.cri.sandbox-namespace", "io.kubernetes.cri.sandbox-uid",
	} {
		c.Annotations[k] = "value"
	}
	for _, m := range []string{"/etc/hosts", "/dev/termination-log", "/etc/hostname", "/etc/resolv.conf", "/dev/shm",
		"/var/run/secrets/kubernetes.io/serviceaccount"} {
		c.Mounts = append(c.Mounts, &api.Mount{Source: "/var/lib/kubelet/x" + m, Destination: m, Type: "bind"})
	}
	return c
}

// BenchmarkCreateContainerPlain is the handler for a container that asks
// for nothing: the path every container of the node takes.
func BenchmarkCreateContainerPlain(b *testing.B) {
	p := benchPlugin(b)
	ctx, sandbox, ctr := context.Background(), pod("plain"), plainContainer()
	b.ReportAllocs()
	for b.Loop() {
		adj, _, err := p.CreateContainer(ctx, sandbox, ctr)
		if err != nil || adj != nil {
			b.Fatal(adj, err)
		}
	}
}

// BenchmarkCreateContainerGPU is the handler for a container allocated one
// card, with an in-process authorizer (no kubelet round trip).
func BenchmarkCreateContainerGPU(b *testing.B) {
	p := benchPlugin(b)
	ctx, sandbox, ctr := context.Background(), pod("gpu"), plainContainer()
	asks(resI915, cardA)(ctr)
	b.ReportAllocs()
	for b.Loop() {
		adj, _, err := p.CreateContainer(ctx, sandbox, ctr)
		if err != nil || len(adj.GetLinux().GetDevices()) != 2 {
			b.Fatal(adj, err)
		}
	}
}

// BenchmarkCreateContainerGPUHostStat is BenchmarkCreateContainerGPU with
// the real host check: the card's nodes and by-path links are real char
// devices in a fake tree, stat(2)ed on every call (root only: mknod).
func BenchmarkCreateContainerGPUHostStat(b *testing.B) {
	drmtest.SkipUnlessRoot(b)
	tree := drmtest.MustBuild(b, drmtest.IntelIGPU)
	inv, err := drm.Discover(tree.Roots())
	require.NoError(b, err)
	require.Len(b, inv.Cards, 1)
	dir := b.TempDir()
	w, err := cdi.NewWriter(dir, kind)
	require.NoError(b, err)
	_, err = w.Sync(inv.Cards)
	require.NoError(b, err)
	id := inv.Cards[0].ID
	nodes, err := cdi.LoadDevices(dir, kind)
	require.NoError(b, err)
	p := benchPluginOn(b, dir, cdi.LoadDevices, podresourcestest.Fixed{resI915: {id}}, nil)
	ctx, sandbox, ctr := context.Background(), pod("gpu"), plainContainer()
	asks(resI915, id)(ctr)
	b.ReportAllocs()
	for b.Loop() {
		adj, _, err := p.CreateContainer(ctx, sandbox, ctr)
		if err != nil || len(adj.GetLinux().GetDevices()) != len(nodes[id]) {
			b.Fatal(adj, err)
		}
	}
}

// BenchmarkCreateContainerGPUPodResources adds the PodResources round
// trip to a fake kubelet over its unix socket.
func BenchmarkCreateContainerGPUPodResources(b *testing.B) {
	r := newRig(b)
	r.kubelet.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {resI915: {cardA}}})
	ctx, sandbox, ctr := context.Background(), pod("gpu"), plainContainer()
	asks(resI915, cardA)(ctr)
	b.ReportAllocs()
	for b.Loop() {
		adj, _, err := r.plugin.CreateContainer(ctx, sandbox, ctr)
		if err != nil || len(adj.GetLinux().GetDevices()) != 2 {
			b.Fatal(adj, err)
		}
	}
}

// BenchmarkRuntimeCreateContainerPlain is CreateContainer through the real
// NRI runtime side and the ttrpc connection, for a plain container.
func BenchmarkRuntimeCreateContainerPlain(b *testing.B) {
	r := newRig(b)
	r.start()
	ctx, sandbox := context.Background(), pod("plain")
	b.ReportAllocs()
	for b.Loop() {
		ctr := plainContainer()
		if _, err := r.runtime.CreateContainer(ctx, &api.CreateContainerRequest{Pod: sandbox, Container: ctr}); err != nil {
			b.Fatal(err)
		}
	}
}
