package agent

import (
	"path/filepath"
	"slices"

	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// parentDevice returns the sysfs device of a card ID when it exists: a
// PCI function (/sys/bus/pci/devices/<id>) or a platform device
// (/sys/bus/platform/devices/<id>), resolved.
func parentDevice(sysfs, id string) (string, bool) {
	for _, bus := range []string{"pci", "platform"} {
		p, err := filepath.EvalSymlinks(filepath.Join(sysfs, "bus", bus, "devices", id))
		if err == nil {
			return p, true
		}
	}
	return "", false
}

// SeedUnbound makes the reconciler treat, from its first pass, every card
// in held (card ID -> resource, what an InUseReporter returns) whose
// sysfs device exists as a card it has seen: one that discovery does not
// report then is an unbound card (listed Unhealthy under the resource it
// was handed out from, with a spec that holds no device node), not a
// card it never knew. A kubelet that reuses its checkpointed answer for
// such a card therefore gets the same result as after an unbind the agent
// watched. It returns the seeded card IDs, sorted, and, sorted, the held
// cards whose sysfs device exists but whose resource is unknown ("") or
// one the config does not serve (a pool removed from the config): no pool
// can be made up for them, so they are not seeded and are listed only
// when discovery reports them. Malformed card IDs are ignored.
func (r *Reconciler) SeedUnbound(held map[string]string, sysfs string) (seeded, unseeded []string) {
	for id, res := range held {
		if alloc.ValidCardID(id) != nil {
			continue
		}
		path, ok := parentDevice(sysfs, id)
		if !ok {
			continue
		}
		if res == "" || !r.cfg.ServesResource(res) {
			unseeded = append(unseeded, id)
			continue
		}
		c := drm.Card{ID: id, NUMANode: -1, SysfsPath: path}
		if filepath.Base(filepath.Dir(path)) != "platform" {
			c.PCIAddress = id
		}
		r.known[id] = known{card: c, healthy: false}
		r.pinned[id] = res
		seeded = append(seeded, id)
	}
	slices.Sort(seeded)
	slices.Sort(unseeded)
	return seeded, unseeded
}

// addPinned puts every unhealthy card whose pool came from the backend's
// record of cards in use (SeedUnbound) and that no pool took into the
// pool of that resource, creating the pool when no card of it is present.
func (r *Reconciler) addPinned(pools []config.Pool, next map[string]known) []config.Pool {
	if len(r.pinned) == 0 {
		return pools
	}
	taken := advertisedIn(pools)
	for id, res := range r.pinned {
		k, ok := next[id]
		if !ok || k.healthy {
			delete(r.pinned, id) // back, or gone: the normal rules apply
			continue
		}
		if taken[id] {
			continue
		}
		i := slices.IndexFunc(pools, func(p config.Pool) bool { return p.Resource == res })
		if i < 0 {
			pools = append(pools, config.Pool{Resource: res, Replicas: 1, Default: true})
			i = len(pools) - 1
		}
		pools[i].Cards = append(pools[i].Cards, k.card)
		slices.SortFunc(pools[i].Cards, byID)
	}
	return pools
}
