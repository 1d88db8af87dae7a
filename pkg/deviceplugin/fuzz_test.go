package deviceplugin

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// FuzzPreferred checks GetPreferredAllocation's choice (state.preferred)
// on pools of up to 8 cards with up to 4 replicas each, some unhealthy,
// spread over NUMA nodes, for arbitrary available and must-include lists
// and sizes. Bytes pick the IDs: avail indexes every advertised ID plus
// a few IDs the pool does not advertise; must indexes avail, because the
// kubelet's must-include devices are always among the available ones.
//
// For every request: no panic, no duplicate, nothing that was not
// offered, the same answer for the available list in any order. For
// requests the kubelet can send (size >= 0, must-include at most size):
// exactly min(size, distinct available) devices, every must-include one,
// usable (advertised, healthy) devices before the others, and a second
// device of a card only when every usable device not chosen yet is on a
// card already chosen.
func FuzzPreferred(f *testing.F) {
	f.Add(uint8(2), uint8(3), uint8(0), uint8(0), []byte{0, 1, 2, 3, 4, 5}, []byte{}, int32(3))
	f.Add(uint8(4), uint8(1), uint8(0b0110), uint8(0b0001), []byte{0, 1, 2, 3}, []byte{2}, int32(2))
	f.Add(uint8(3), uint8(2), uint8(0b010101), uint8(0b010), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8}, []byte{5, 5}, int32(4))
	f.Add(uint8(2), uint8(4), uint8(0), uint8(0), []byte{7, 6, 5, 4, 3, 2, 1, 0}, []byte{0, 1}, int32(2))
	f.Add(uint8(1), uint8(1), uint8(0), uint8(0), []byte{0, 0, 1, 2, 3}, []byte{}, int32(8))
	f.Add(uint8(2), uint8(2), uint8(0), uint8(0), []byte{0, 1, 2}, []byte{0, 1}, int32(1))
	f.Add(uint8(2), uint8(2), uint8(0), uint8(0), []byte{0, 1, 2}, []byte{}, int32(-1))
	f.Add(uint8(2), uint8(2), uint8(0), uint8(0), []byte{0, 1, 2}, []byte{}, int32(1<<31-1))
	f.Fuzz(func(t *testing.T, nCards, replicas, numa, unhealthyMask uint8, availIdx, mustIdx []byte, size32 int32) {
		pool := config.Pool{Resource: "dri-cdi.dev/i915", Replicas: int(replicas%4) + 1}
		unhealthy := map[string]bool{}
		for i := range int(nCards%8) + 1 {
			id := fmt.Sprintf("0000:%02x:00.0", i+1)
			// Two bits of numa per card: node 0, 1, 2 or unknown (-1).
			node := int(numa>>(2*(i%4))&3) - 1
			pool.Cards = append(pool.Cards, drm.Card{ID: id, NUMANode: node})
			if unhealthyMask&(1<<i) != 0 {
				unhealthy[id] = true
			}
		}
		st := buildState(pool, unhealthy, DeliveryNRI, func(id string) string { return "dri-cdi.dev/gpu=" + id })

		var universe []string
		for _, d := range st.list.Devices {
			universe = append(universe, d.ID)
		}
		// IDs the pool does not advertise: another card, a replica past
		// the last, a bare card ID of a replicated pool, and non-IDs.
		first := pool.Cards[0].ID
		universe = append(universe, "0000:99:00.0", alloc.ReplicaID(first, pool.Replicas), first+"::0", "not an ID", "")
		var available, must []string
		for _, b := range availIdx {
			available = append(available, universe[int(b)%len(universe)])
		}
		for _, b := range mustIdx {
			if len(available) > 0 {
				must = append(must, available[int(b)%len(available)])
			}
		}
		size := int(size32)

		got := st.preferred(slices.Clone(available), slices.Clone(must), size)

		offered := map[string]bool{}
		for _, id := range append(slices.Clone(available), must...) {
			offered[id] = true
		}
		seen := map[string]bool{}
		for _, id := range got {
			require.False(t, seen[id], "%q twice in %q", id, got)
			seen[id] = true
			require.True(t, offered[id], "%q was not offered", id)
		}
		reversed := slices.Clone(available)
		slices.Reverse(reversed)
		require.Equal(t, got, st.preferred(reversed, slices.Clone(must), size), "answer depends on the order of available")

		distinctMust := slices.Compact(slices.Sorted(slices.Values(must)))
		if size < 0 || len(distinctMust) > size {
			return // the kubelet never asks this
		}
		distinctAvail := slices.Compact(slices.Sorted(slices.Values(available)))
		require.Len(t, got, min(size, len(distinctAvail)), "available %q, must %q, size %d", available, must, size)
		for _, id := range distinctMust {
			require.True(t, seen[id], "must-include %q missing from %q", id, got)
		}
		require.Equal(t, distinctMust, slices.Compact(slices.Sorted(slices.Values(got[:len(distinctMust)]))), "must-include devices first")

		// Replay the choice after the must-include devices: at each
		// step, rest is the usable devices not chosen yet.
		usable := func(id string) bool { d := st.devices[id]; return d != nil && d.card.healthy }
		cardsBefore := map[string]bool{}
		for _, id := range got[:len(distinctMust)] {
			cardsBefore[alloc.CardID(id)] = true
		}
		for i := len(distinctMust); i < len(got); i++ {
			id, card := got[i], alloc.CardID(got[i])
			var rest []string
			for _, a := range distinctAvail {
				if a != id && usable(a) && !slices.Contains(got[:i], a) {
					rest = append(rest, a)
				}
			}
			if !usable(id) {
				require.Empty(t, rest, "%q (unknown or unhealthy) chosen before usable %q, in %q", id, rest, got)
			} else if cardsBefore[card] {
				for _, r := range rest {
					require.True(t, cardsBefore[alloc.CardID(r)],
						"%q is a second device of card %s, chosen before %q on an unused card, in %q", id, card, r, got)
				}
			}
			cardsBefore[card] = true
		}
	})
}
