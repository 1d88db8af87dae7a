package dra

import (
	"slices"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/draapi"
)

// Shared cards need the API server to keep what makes them shareable
// (allowMultipleAllocations and the capacity, DRAConsumableCapacity).
// One that does not know the fields drops them on write without an
// error; the card would then be published as an exclusive device while
// the plugin expects shares. So the plugin looks at the slice the API
// server answers each write with (or lists), and when the fields are
// gone it publishes every card exclusively from then on and says so. It
// looks at what the API server kept, never at its version.

// sharesDroppedMessage is logged once when the API server dropped the
// fields.
const sharesDroppedMessage = "the API server dropped allowMultipleAllocations and the shares capacity from this node's " +
	"ResourceSlice (it does not serve DRA consumable capacity: the DRAConsumableCapacity feature gate is off, or the " +
	"API server is older than the plugin); pools with shares are published as exclusive cards instead, one claim per card"

// shared returns the names of inv's devices published with shares.
func (inv Inventory) shared() map[string]bool {
	names := map[string]bool{}
	for name, dev := range inv.ByName {
		if dev.Shares > 0 {
			names[name] = true
		}
	}
	return names
}

// withoutShares is pools with every pool's shares cleared.
func withoutShares(pools []config.Pool) []config.Pool {
	out := slices.Clone(pools)
	for i := range out {
		out[i].Shares = 0
	}
	return out
}

// checkSharesKept looks, after each sync, at what the API server stored
// of the shareable cards: when it dropped their shares, every card is
// published exclusively from then on (republish, off the caller's
// goroutine). Callers hold d.mu.
func (d *Driver) checkSharesKept(stored []*draapi.ResourceSlice) {
	names := d.inv.shared()
	if len(names) == 0 || d.noShares {
		return
	}
	for _, s := range stored {
		for _, dev := range s.Spec.Devices {
			if names[dev.Name] && !keptShares(dev) {
				d.log.Error(sharesDroppedMessage)
				d.noShares = true
				go d.republish()
				return
			}
		}
	}
}

// keptShares reports whether dev, as the API server stored it, is still
// shareable.
func keptShares(dev draapi.Device) bool {
	_, capacity := dev.Capacity[CapacityShares]
	return dev.AllowMultipleAllocations != nil && *dev.AllowMultipleAllocations && capacity
}
