package nri_test

import (
	"context"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
)

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
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	store := nri.NewSpecIndex(dir, kind, cdi.LoadDevices, nil, logrus.NewEntry(log))
	require.NoError(b, store.Reload())
	id := inv.Cards[0].ID
	nodes, _ := store.Nodes(id)
	p, err := nri.New(nri.Config{
		Kind: kind, Resources: served{resI915: true}, Authorizer: podresourcestest.Fixed{resI915: {id}},
		Devices: store, Log: logrus.NewEntry(log),
	})
	require.NoError(b, err)
	ctx, sandbox, ctr := context.Background(), pod("gpu"), plainContainer()
	claims(resI915, id)(ctr)
	b.ReportAllocs()
	for b.Loop() {
		adj, _, err := p.CreateContainer(ctx, sandbox, ctr)
		if err != nil || len(adj.GetLinux().GetDevices()) != len(nodes) {
			b.Fatal(adj, err)
		}
	}
}
