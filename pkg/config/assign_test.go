package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
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
