package nri_test

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

func testCard(id string, n uint32) drm.Card {
	render := drm.DeviceNode{
		Path: "/dev/dri/renderD" + itoa(128+n), HostPath: "/dev/dri/renderD" + itoa(128+n),
		Major: 226, Minor: 128 + n, Mode: 0o660, GID: renderGID,
	}
	return drm.Card{
		ID: id, Name: "card" + itoa(n), Driver: "i915", Bus: "pci", PCIAddress: id, NUMANode: -1,
		VendorID: "8086", DeviceID: "56a0",
		CardNode: drm.DeviceNode{
			Path: "/dev/dri/card" + itoa(n), HostPath: "/dev/dri/card" + itoa(n),
			Major: 226, Minor: n, Mode: 0o660, GID: videoGID,
		},
		RenderNode: &render,
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

// TestSpecsFromTheAgentsWriter checks the plugin against the real spec
// files: what the agent's writer produces is what the plugin injects, and
// a card the writer adds or removes is picked up.
func TestSpecsFromTheAgentsWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cdi")
	log := logrus.NewEntry(logrus.New())
	w, err := cdi.NewWriter(dir, cdi.DefaultKind)
	require.NoError(t, err)
	_, err = w.Sync([]drm.Card{testCard(cardA, 1)})
	require.NoError(t, err)

	store := nri.NewSpecIndex(dir, cdi.DefaultKind, cdi.LoadDevices, nil, log)
	nri.Watching(t, store)

	require.Eventually(t, func() bool { _, ok := store.Nodes(cardA); return ok }, waitFor, tick)
	nodes, _ := store.Nodes(cardA)
	var got []string
	for _, n := range nodes {
		got = append(got, n.Path+" "+itoa(n.Major)+":"+itoa(n.Minor))
	}
	require.Equal(t, []string{"/dev/dri/card1 226:1", "/dev/dri/renderD129 226:129"}, got)
	_, ok := store.Nodes(cdi.AllDevice)
	require.False(t, ok)

	_, err = w.Sync([]drm.Card{testCard(cardA, 1), testCard(cardB, 2)})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := store.Nodes(cardB); return ok }, waitFor, tick)

	_, err = w.Sync([]drm.Card{testCard(cardB, 2)})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := store.Nodes(cardA); return !ok }, waitFor, tick)
}
