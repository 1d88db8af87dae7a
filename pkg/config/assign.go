package config

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// Pool is one kubelet resource with the cards assigned to it.
type Pool struct {
	// Resource is the extended resource name the pool registers.
	Resource string
	// Replicas is the number of device IDs advertised per card, >= 1.
	Replicas int
	// AllowSameCardReplicas lets one container receive two replicas of
	// one card.
	AllowSameCardReplicas bool
	// Shares is the number of shares of each card as a DRA device; 0
	// publishes the cards for exclusive claims.
	Shares int
	// Default is true for the per-driver pools made by defaultPools.
	Default bool
	// Cards are the pool's cards, sorted by ID. A configured pool may have
	// none.
	Cards []drm.Card
}

// Assign distributes cards over the pools. It returns every configured
// pool, in config order and possibly without cards, followed by the
// default pools that received at least one card, sorted by resource. A
// card belongs to at most one pool: the first configured pool that takes
// it, else (with DefaultPools, and only if it has a render node) the pool
// of its driver. Cards are sorted by ID within each pool.
func (c *Config) Assign(cards []drm.Card) []Pool {
	if c == nil {
		c = Default()
	}
	sorted := append([]drm.Card(nil), cards...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })

	pools := make([]Pool, len(c.Pools))
	configured := map[string]bool{}
	for i, pc := range c.Pools {
		pools[i] = Pool{Resource: pc.Resource, Replicas: max(pc.Replicas, 1), AllowSameCardReplicas: pc.AllowSameCardReplicas}
		if pc.Shares != nil {
			pools[i].Shares = *pc.Shares
		}
		configured[pc.Resource] = true
	}
	defaults := map[string]*Pool{}
	for _, card := range sorted {
		taken := false
		for i := range c.Pools {
			if c.Pools[i].Takes(&card) {
				pools[i].Cards = append(pools[i].Cards, card)
				taken = true
				break
			}
		}
		if taken || !c.DefaultPools || card.DisplayOnly() {
			continue
		}
		res := DefaultPoolResource(card.Driver)
		if res == "" || configured[res] {
			continue
		}
		p := defaults[res]
		if p == nil {
			p = &Pool{Resource: res, Replicas: 1, Default: true}
			defaults[res] = p
		}
		p.Cards = append(p.Cards, card)
	}
	for _, res := range slices.Sorted(maps.Keys(defaults)) {
		pools = append(pools, *defaults[res])
	}
	return pools
}

// Takes reports whether the pool's criteria accept the card: its driver
// is listed (when Drivers is set), its PCI vendor:device matches (when
// PCIIDs is set), and it has a render node unless IncludeDisplayOnly.
// A pool with neither Drivers nor PCIIDs takes nothing.
func (p *PoolConfig) Takes(card *drm.Card) bool {
	if len(p.Drivers) == 0 && len(p.PCIIDs) == 0 {
		return false
	}
	if card.DisplayOnly() && !p.IncludeDisplayOnly {
		return false
	}
	if len(p.Drivers) > 0 && !slices.Contains(p.Drivers, card.Driver) {
		return false
	}
	if len(p.PCIIDs) > 0 && !matchPCIID(p.PCIIDs, card.VendorID, card.DeviceID) {
		return false
	}
	return true
}

func matchPCIID(ids []string, vendor, device string) bool {
	if vendor == "" {
		return false
	}
	for _, id := range ids {
		v, d, _ := strings.Cut(id, ":")
		if strings.EqualFold(v, vendor) && (d == "*" || strings.EqualFold(d, device)) {
			return true
		}
	}
	return false
}

// PoolOf returns the resource of the pool that takes card under this
// config and that pool's config (nil for a default pool), or "" when no
// pool takes it. It is the choice Assign makes.
func (c *Config) PoolOf(card *drm.Card) (string, *PoolConfig) {
	if c == nil {
		c = Default()
	}
	for i := range c.Pools {
		if c.Pools[i].Takes(card) {
			return c.Pools[i].Resource, &c.Pools[i]
		}
	}
	if !c.DefaultPools || card.DisplayOnly() {
		return "", nil
	}
	res := DefaultPoolResource(card.Driver)
	for _, p := range c.Pools {
		if p.Resource == res {
			return "", nil // a configured pool of that name takes other cards
		}
	}
	return res, nil
}

// AttachCompanions adds to each card's Extra the companion nodes of the
// pool that takes it (PoolConfig.Companions) and of its driver
// (drm.DefaultCompanions), found under roots, and returns one error per
// companion refused or missing, naming the pool, the companion, the node
// and the reason. A card no pool takes gets none. Unavailable cards
// (without nodes) are left alone.
func (c *Config) AttachCompanions(roots drm.Roots, cards []drm.Card) []error {
	var errs []error
	for i := range cards {
		card := &cards[i]
		res, pc := c.PoolOf(card)
		if res == "" {
			continue
		}
		comps := slices.Clone(drm.DefaultCompanions[card.Driver])
		if pc != nil {
			comps = append(comps, pc.Companions...)
		}
		if len(comps) == 0 {
			continue
		}
		nodes, cerrs := drm.Companions(roots, card, comps)
		card.Extra = append(card.Extra, nodes...)
		for _, err := range cerrs {
			errs = append(errs, fmt.Errorf("pool %s: %w", res, err))
		}
	}
	return errs
}

// Discover is drm.Discover of roots with the companions of c attached
// (AttachCompanions; their errors in Inventory.Companions): the one
// discovery step of the agent loop, the CLI and doctor.
func (c *Config) Discover(roots drm.Roots) (*drm.Inventory, error) {
	inv, err := drm.Discover(roots)
	if err != nil {
		return nil, err
	}
	inv.Companions = c.AttachCompanions(roots, inv.Cards)
	return inv, nil
}
