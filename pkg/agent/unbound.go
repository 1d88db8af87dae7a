package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// CheckpointName is the kubelet's device manager checkpoint in the
// device-plugins dir. It survives kubelet and agent restarts.
const CheckpointName = "kubelet_internal_checkpoint"

// maxCheckpoint bounds how much of the checkpoint is read.
const maxCheckpoint = 16 << 20

// checkpoint is the part of the kubelet's device manager checkpoint
// (pkg/kubelet/cm/devicemanager/checkpoint, v1.37: {"Data":
// {"PodDeviceEntries": [...], "RegisteredDevices": {...}}, "Checksum"})
// that tells which device IDs are allocated under which resource.
type checkpoint struct {
	Data struct {
		PodDeviceEntries []struct {
			ResourceName string
			DeviceIDs    map[string][]string // NUMA node -> device IDs
		}
	}
}

// allocatedCards reads the kubelet checkpoint in dir and returns, for
// every card allocated to some container under a resource served
// reports true for, that resource. A missing checkpoint holds nothing.
func allocatedCards(dir string, served func(string) bool) (map[string]string, error) {
	p := filepath.Join(dir, CheckpointName)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read kubelet checkpoint %s: %w", p, err)
	}
	defer f.Close()
	var cp checkpoint
	if err := json.NewDecoder(io.LimitReader(f, maxCheckpoint)).Decode(&cp); err != nil {
		return nil, fmt.Errorf("parse kubelet checkpoint %s: %w", p, err)
	}
	out := map[string]string{}
	for _, e := range cp.Data.PodDeviceEntries {
		if !served(e.ResourceName) {
			continue
		}
		for _, ids := range e.DeviceIDs {
			for _, id := range ids {
				if card := alloc.CardID(id); card != "" && alloc.ValidCardID(card) == nil {
					out[card] = e.ResourceName
				}
			}
		}
	}
	return out, nil
}

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
// the kubelet has allocated (per its checkpoint) whose sysfs device
// exists as a card it has seen: one that discovery does not report then
// is an unbound card (listed Unhealthy under the resource it was
// allocated from, with a spec that holds no device node), not a card it
// never knew. A kubelet that reuses its checkpointed Allocate answer for
// such a card therefore gets the same result as after an unbind the agent
// watched. It returns the seeded card IDs, sorted.
func (r *Reconciler) SeedUnbound(kubeletDir, sysfs string) ([]string, error) {
	cards, err := allocatedCards(kubeletDir, r.cfg.ServesResource)
	if err != nil {
		return nil, err
	}
	var seeded []string
	for id, res := range cards {
		path, ok := parentDevice(sysfs, id)
		if !ok {
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
	return seeded, nil
}

// addPinned puts every unhealthy card whose pool came from the kubelet's
// checkpoint (SeedUnbound) and that no pool took into the pool of that
// resource, creating the pool when no card of it is present.
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
		slices.SortFunc(pools[i].Cards, func(a, b drm.Card) int { return cmpID(a.ID, b.ID) })
	}
	return pools
}

func cmpID(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
