package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

func card(id, driver, vendor, device string, render bool) drm.Card {
	c := drm.Card{ID: id, Driver: driver, VendorID: vendor, DeviceID: device, NUMANode: -1,
		CardNode: drm.DeviceNode{Path: "/dev/dri/card0"}}
	if render {
		c.RenderNode = &drm.DeviceNode{Path: "/dev/dri/renderD128"}
	}
	return c
}

// summary maps resource -> card IDs, keeping pool order in a slice.
type poolSummary struct {
	Resource string
	Replicas int
	Default  bool
	Cards    []string
}

func summarize(pools []Pool) []poolSummary {
	out := make([]poolSummary, 0, len(pools))
	for _, p := range pools {
		s := poolSummary{Resource: p.Resource, Replicas: p.Replicas, Default: p.Default}
		for _, c := range p.Cards {
			s.Cards = append(s.Cards, c.ID)
		}
		out = append(out, s)
	}
	return out
}

func TestAssign(t *testing.T) {
	igpu := card("0000:00:02.0", "i915", "8086", "46a6", true)
	arc := card("0000:03:00.0", "i915", "8086", "56a0", true)
	xe := card("0000:04:00.0", "xe", "8086", "e20b", true)
	amd := card("0000:05:00.0", "amdgpu", "1002", "744c", true)
	virtio := card("0000:00:05.0", "virtio_gpu", "1af4", "1050", true)
	vkms := card("vkms", "vkms", "", "", true)
	simple := card("simple-framebuffer.0", "simpledrm", "", "", false)
	all := []drm.Card{xe, amd, igpu, arc, virtio, vkms, simple}

	tests := map[string]struct {
		yaml  string
		cards []drm.Card
		want  []poolSummary
	}{
		"defaults: one pool per driver, display-only left out": {
			cards: all,
			want: []poolSummary{
				{Resource: "dri-cdi.dev/amdgpu", Replicas: 1, Default: true, Cards: []string{amd.ID}},
				{Resource: "dri-cdi.dev/i915", Replicas: 1, Default: true, Cards: []string{igpu.ID, arc.ID}},
				{Resource: "dri-cdi.dev/virtio_gpu", Replicas: 1, Default: true, Cards: []string{virtio.ID}},
				{Resource: "dri-cdi.dev/vkms", Replicas: 1, Default: true, Cards: []string{vkms.ID}},
				{Resource: "dri-cdi.dev/xe", Replicas: 1, Default: true, Cards: []string{xe.ID}},
			},
		},
		"no cards": {cards: nil, want: []poolSummary{}},
		"configured pool by pci id, rest default": {
			yaml:  "pools:\n- resource: gpu.intel.com/arc\n  pciIDs: [\"8086:56a0\"]\n  replicas: 3\n",
			cards: []drm.Card{igpu, arc, amd},
			want: []poolSummary{
				{Resource: "gpu.intel.com/arc", Replicas: 3, Cards: []string{arc.ID}},
				{Resource: "dri-cdi.dev/amdgpu", Replicas: 1, Default: true, Cards: []string{amd.ID}},
				{Resource: "dri-cdi.dev/i915", Replicas: 1, Default: true, Cards: []string{igpu.ID}},
			},
		},
		"card matching two pools belongs to the first": {
			yaml: "defaultPools: false\npools:\n- resource: a.example/first\n  pciIDs: [\"8086:*\"]\n" +
				"- resource: a.example/second\n  drivers: [i915]\n",
			cards: []drm.Card{igpu, arc, xe},
			want: []poolSummary{
				{Resource: "a.example/first", Replicas: 1, Cards: []string{igpu.ID, arc.ID, xe.ID}},
				{Resource: "a.example/second", Replicas: 1},
			},
		},
		"drivers and pciIDs must both match": {
			yaml:  "defaultPools: false\npools:\n- resource: a.example/x\n  drivers: [i915]\n  pciIDs: [\"8086:e20b\", \"8086:46a6\"]\n",
			cards: []drm.Card{igpu, arc, xe},
			want:  []poolSummary{{Resource: "a.example/x", Replicas: 1, Cards: []string{igpu.ID}}},
		},
		"pci ids match case-insensitively, non-pci cards never": {
			yaml:  "defaultPools: false\npools:\n- resource: a.example/x\n  pciIDs: [\"1AF4:*\"]\n",
			cards: []drm.Card{virtio, vkms},
			want:  []poolSummary{{Resource: "a.example/x", Replicas: 1, Cards: []string{virtio.ID}}},
		},
		"display-only only where included": {
			yaml: "pools:\n- resource: a.example/render\n  drivers: [simpledrm, vkms]\n" +
				"- resource: a.example/display\n  drivers: [simpledrm]\n  includeDisplayOnly: true\n",
			cards: []drm.Card{simple, vkms},
			want: []poolSummary{
				{Resource: "a.example/render", Replicas: 1, Cards: []string{vkms.ID}},
				{Resource: "a.example/display", Replicas: 1, Cards: []string{simple.ID}},
			},
		},
		"default pool name taken by a configured pool": {
			yaml:  "pools:\n- resource: dri-cdi.dev/i915\n  pciIDs: [\"8086:56a0\"]\n",
			cards: []drm.Card{igpu, arc},
			want:  []poolSummary{{Resource: "dri-cdi.dev/i915", Replicas: 1, Cards: []string{arc.ID}}},
		},
		"driver that cannot form a resource name": {
			cards: []drm.Card{card("x", "_bad", "", "", true), card("y", "", "", "", true)},
			want:  []poolSummary{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.yaml))
			require.NoError(t, err)
			require.Equal(t, tc.want, summarize(cfg.Assign(tc.cards)))
		})
	}
}

func TestAssignKeepsCardData(t *testing.T) {
	c := card("0000:00:02.0", "i915", "8086", "46a6", true)
	c.NUMANode = 1
	pools := Default().Assign([]drm.Card{c})
	require.Len(t, pools, 1)
	require.Equal(t, []drm.Card{c}, pools[0].Cards)
}

// A pool's shares reach its cards' pool; without the field, and in
// default pools, cards are exclusive (0).
func TestAssignShares(t *testing.T) {
	cfg, err := Parse([]byte("pools:\n- resource: dri-cdi.dev/intel\n  drivers: [i915]\n  shares: 4\n- resource: dri-cdi.dev/xe\n  drivers: [xe]\n"))
	require.NoError(t, err)
	pools := cfg.Assign([]drm.Card{
		card("0000:00:02.0", "i915", "8086", "46a6", true),
		card("0000:04:00.0", "xe", "8086", "e20b", true),
		card("0000:05:00.0", "amdgpu", "1002", "744c", true),
	})
	shares := map[string]int{}
	for _, p := range pools {
		shares[p.Resource] = p.Shares
	}
	require.Equal(t, map[string]int{"dri-cdi.dev/intel": 4, "dri-cdi.dev/xe": 0, "dri-cdi.dev/amdgpu": 0}, shares)
}

// Companions come from the pool that takes a card, plus its driver's
// default ones (amdgpu's /dev/kfd) in any pool; every refused or missing
// companion is reported naming the pool.
func TestAttachCompanions(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	noKFD := drmtest.AMDdGPU.WithPCI("0000:05:00.0").WithNodes(3, 130)
	noKFD.KFD = false
	tree := drmtest.MustBuild(t, drmtest.PiV3D, drmtest.PiVC4, drmtest.AMDdGPU.WithNodes(2, 129))
	require.NoError(t, tree.AddCharDevice(drmtest.CharDevice{Class: "video4linux", Name: "video10", Parent: "platform/soc/soc:bcm2835-codec", Major: 81, Minor: 10}))
	require.NoError(t, tree.AddCharDevice(drmtest.CharDevice{Class: "scsi_generic", Name: "sg0", Major: 21, Minor: 0}))
	cfg, err := Parse([]byte(`
pools:
- resource: example.com/pi
  drivers: [v3d]
  companions:
  - subsystem: video4linux
  - path: /dev/sg*
  - path: /dev/dma_heap/*
- resource: example.com/amd
  drivers: [amdgpu]
  replicas: 2
`))
	require.NoError(t, err)
	inv, err := cfg.Discover(tree.Roots())
	require.NoError(t, err)
	extra := map[string][]string{}
	for _, c := range inv.Cards {
		for _, n := range c.Extra {
			extra[c.ID] = append(extra[c.ID], n.Path)
		}
	}
	require.Equal(t, map[string][]string{
		drmtest.PiV3D.ID():   {"/dev/video10"},
		drmtest.AMDdGPU.ID(): {"/dev/kfd"}, // the driver's default, in a configured pool
	}, extra, "vc4 is display-only: no pool takes it, so it gets nothing")
	var msgs []string
	for _, e := range inv.Companions {
		msgs = append(msgs, e.Error())
	}
	require.Len(t, msgs, 2, "%v", msgs)
	require.Contains(t, msgs[0], `pool example.com/pi: companion /dev/sg* of card fec00000.v3d: companion refused: /dev/sg0 (21:0) is of subsystem "scsi_generic"`)
	require.Contains(t, msgs[1], "pool example.com/pi: companion /dev/dma_heap/* of card fec00000.v3d: companion missing: no node matches")
	require.ErrorIs(t, inv.Companions[0], drm.ErrCompanionRefused)
	require.ErrorIs(t, inv.Companions[1], drm.ErrCompanionMissing)

	// An amdgpu card in its default pool on a node without /dev/kfd.
	tree2 := drmtest.MustBuild(t, noKFD)
	inv, err = Default().Discover(tree2.Roots())
	require.NoError(t, err)
	require.Empty(t, inv.Cards[0].Extra)
	require.Len(t, inv.Companions, 1)
	require.ErrorContains(t, inv.Companions[0], "pool dri-cdi.dev/amdgpu: companion /dev/kfd of card 0000:05:00.0: companion missing")
}
