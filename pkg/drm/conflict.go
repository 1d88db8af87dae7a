package drm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrNumberConflict: two cards claim the same device number for their
// card or render node. Neither can be told to own it, so both are left
// out: handing either one's name the number could give a container the
// other card.
var ErrNumberConflict = errors.New("device number claimed by two cards")

// dropConflicts leaves out every card whose card or render node has the
// major:minor of another card's card or render node, with an error
// naming the number and every other card that claims it. Per-driver
// shared nodes (Extra, such as /dev/kfd) are shared on purpose and do
// not count.
func (d *discovery) dropConflicts(cards []built) []built {
	type claim struct {
		card int
		node string
	}
	claims := map[[2]uint32][]claim{}
	for i := range cards {
		for _, n := range cards[i].card.DRMNodes() {
			k := [2]uint32{n.Major, n.Minor}
			claims[k] = append(claims[k], claim{card: i, node: n.Path})
		}
	}
	why := map[int][]string{}
	for k, cs := range claims {
		if len(cs) < 2 {
			continue
		}
		for _, c := range cs {
			var others []string
			for _, o := range cs {
				if o.card != c.card {
					others = append(others, fmt.Sprintf("%s (%s of card %s)", o.node, cards[o.card].card.Name, cards[o.card].card.ID))
				}
			}
			if len(others) == 0 {
				continue // a card whose card and render node share a number is caught elsewhere
			}
			slices.Sort(others)
			why[c.card] = append(why[c.card], fmt.Sprintf("%s is %d:%d, as is %s", c.node, k[0], k[1], strings.Join(others, ", ")))
		}
	}
	if len(why) == 0 {
		return cards
	}
	kept := make([]built, 0, len(cards))
	for i, b := range cards {
		reasons, bad := why[i]
		if !bad {
			kept = append(kept, b)
			continue
		}
		slices.Sort(reasons)
		err := fmt.Errorf("%w: card %s: %s; neither card is advertised", ErrNumberConflict, b.card.ID, strings.Join(reasons, "; "))
		d.skipGroup(b.g, b.g.cardEntry(), err)
	}
	return kept
}
