package deviceplugin

import (
	"slices"

	"github.com/dri-cdi/dri-cdi/pkg/alloc"
)

// noNUMA marks "no preferred NUMA node".
const noNUMA = -2

// candidate is one available device while choosing.
type candidate struct {
	id      string
	cardID  string
	replica int
	numa    int
	usable  bool // known and healthy
}

// preferred picks size device IDs from available for one container:
//  1. every must-include ID, first;
//  2. then devices on physical cards not used yet, before a second
//     replica of a card already chosen;
//  3. among those, devices on the preferred NUMA node: the node of the
//     must-include devices, else the node that can give the most
//     distinct cards;
//  4. then the card with the most free replicas (spread the load), then
//     by ID for a stable answer.
//
// Unknown or unhealthy IDs come last. The answer has min(size, number of
// distinct IDs offered) entries. size comes from the request unchecked:
// a negative one asks for nothing, and a huge one reserves no more than
// the IDs offered.
func (st *state) preferred(available, mustInclude []string, size int) []string {
	size = max(size, 0)
	out := make([]string, 0, min(size, len(mustInclude)+len(available)))
	taken := map[string]bool{}
	used := map[string]int{} // card ID -> devices chosen
	var mustNUMA []int
	for _, id := range mustInclude {
		if taken[id] {
			continue
		}
		taken[id] = true
		out = append(out, id)
		if d := st.devices[id]; d != nil {
			used[d.card.id]++
			if d.card.numa >= 0 && !slices.Contains(mustNUMA, d.card.numa) {
				mustNUMA = append(mustNUMA, d.card.numa)
			}
		} else {
			used[alloc.CardID(id)]++
		}
	}
	if len(out) >= size {
		return out
	}

	var cands []candidate
	free := map[string]int{} // card ID -> available replicas
	for _, id := range available {
		if taken[id] {
			continue
		}
		taken[id] = true
		c := candidate{id: id, numa: -1}
		if d := st.devices[id]; d != nil {
			c.cardID, c.replica, c.numa, c.usable = d.card.id, d.replica, d.card.numa, d.card.healthy
		} else {
			c.cardID = alloc.CardID(id)
		}
		free[c.cardID]++
		cands = append(cands, c)
	}
	need := size - len(out)
	pref := preferredNUMA(cands, used, mustNUMA, need)

	better := func(a, b *candidate) bool {
		if a.usable != b.usable {
			return a.usable
		}
		if used[a.cardID] != used[b.cardID] {
			return used[a.cardID] < used[b.cardID]
		}
		if (a.numa == pref) != (b.numa == pref) {
			return a.numa == pref
		}
		if free[a.cardID] != free[b.cardID] {
			return free[a.cardID] > free[b.cardID]
		}
		if a.cardID != b.cardID {
			return a.cardID < b.cardID
		}
		if a.replica != b.replica {
			return a.replica < b.replica
		}
		return a.id < b.id
	}
	for ; need > 0 && len(cands) > 0; need-- {
		best := 0
		for i := 1; i < len(cands); i++ {
			if better(&cands[i], &cands[best]) {
				best = i
			}
		}
		c := cands[best]
		out = append(out, c.id)
		used[c.cardID]++
		cands[best] = cands[len(cands)-1]
		cands = cands[:len(cands)-1]
	}
	return out
}

// preferredNUMA returns the NUMA node to fill the request from: the
// must-include devices' node when they agree on one, else the node with
// the most unused distinct usable cards (up to need), then the most
// usable devices, then the lowest number. noNUMA when nothing is known.
func preferredNUMA(cands []candidate, used map[string]int, mustNUMA []int, need int) int {
	if len(mustNUMA) == 1 {
		return mustNUMA[0]
	}
	type score struct {
		cards   map[string]bool
		devices int
	}
	nodes := map[int]*score{}
	for _, c := range cands {
		if c.numa < 0 || !c.usable {
			continue
		}
		s := nodes[c.numa]
		if s == nil {
			s = &score{cards: map[string]bool{}}
			nodes[c.numa] = s
		}
		if used[c.cardID] == 0 {
			s.cards[c.cardID] = true
		}
		s.devices++
	}
	best, bestCards, bestDevices := noNUMA, -1, -1
	for n, s := range nodes {
		cards, devices := min(len(s.cards), need), min(s.devices, need)
		if cards > bestCards || cards == bestCards && (devices > bestDevices || devices == bestDevices && n < best) {
			best, bestCards, bestDevices = n, cards, devices
		}
	}
	return best
}
