package dra

import (
	"context"
	"fmt"
	"slices"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/dri-cdi/dri-cdi/pkg/config"
)

// Shared cards need the API server to keep what makes them shareable
// (allowMultipleAllocations and the capacity, DRAConsumableCapacity).
// One that does not know the fields drops them on write without an
// error; the card would then be published as an exclusive device while
// the plugin expects shares. So after the first publish of a shareable
// card the plugin reads the slice back, and when the fields are gone it
// publishes every card exclusively from then on and says so. It looks at
// what the API server kept, never at its version.

const (
	// sharesCheckEvery and sharesCheckFor pace the read-back: the
	// helper writes the slice shortly after it is handed the devices.
	sharesCheckEvery = 500 * time.Millisecond
	sharesCheckFor   = 2 * time.Minute
)

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

// checkSharesKept starts, once, the read-back of the slice after a
// publish that had a shareable card. Callers hold d.mu.
func (d *Driver) checkSharesKept() {
	if d.sharesChecked {
		return
	}
	names := d.inv.shared()
	if len(names) == 0 {
		return
	}
	d.sharesChecked = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), sharesCheckFor)
		defer cancel()
		kept, err := d.sharesKept(ctx, names)
		switch {
		case err != nil:
			d.log.WithError(err).Warn("cannot read this node's ResourceSlice back to check that its shared cards kept their shares")
		case !kept:
			d.log.Error(sharesDroppedMessage)
			d.mu.Lock()
			d.noShares = true
			d.mu.Unlock()
			d.republish()
		default:
			d.log.Debug("the API server kept the shared cards' shares")
		}
	}()
}

// sharesKept reads the node's slices until one lists a device of names,
// and reports whether every such device kept allowMultipleAllocations
// and its shares capacity.
func (d *Driver) sharesKept(ctx context.Context, names map[string]bool) (bool, error) {
	sel := fields.AndSelectors(fields.OneTermEqualSelector("spec.nodeName", d.opts.NodeName),
		fields.OneTermEqualSelector("spec.driver", DriverName)).String()
	tick := time.NewTicker(sharesCheckEvery)
	defer tick.Stop()
	var lastErr error
	for {
		list, err := d.opts.KubeClient.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err == nil {
			found, kept := false, true
			for _, s := range list.Items {
				if s.Spec.NodeName == nil || *s.Spec.NodeName != d.opts.NodeName || s.Spec.Driver != DriverName {
					continue
				}
				for _, dev := range s.Spec.Devices {
					if !names[dev.Name] {
						continue
					}
					found = true
					kept = kept && keptShares(dev)
				}
			}
			if found {
				return kept, nil
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			if lastErr == nil {
				lastErr = fmt.Errorf("no ResourceSlice of node %s lists its shared cards yet", d.opts.NodeName)
			}
			return false, fmt.Errorf("%w (%w)", ctx.Err(), lastErr)
		case <-tick.C:
		}
	}
}

// keptShares reports whether dev, as the API server stored it, is still
// shareable.
func keptShares(dev resourceapi.Device) bool {
	_, capacity := dev.Capacity[CapacityShares]
	return dev.AllowMultipleAllocations != nil && *dev.AllowMultipleAllocations && capacity
}
