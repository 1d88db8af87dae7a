package nri

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/dmem"
	"github.com/dri-cdi/dri-cdi/pkg/dracheckpoint"
	"github.com/dri-cdi/dri-cdi/pkg/filekey"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
)

// ErrMemoryLimit is wrapped when a container's share of a card of a pool
// with requireMemoryLimit was allocated device memory that the node
// cannot limit.
var ErrMemoryLimit = errors.New("device memory limit required but not enforceable")

// Share names one share of a card as the kubelet reports it for a
// container (PodResources' DynamicResources): the claim, the device and
// the scheduler's share ID.
type Share struct {
	Namespace, Claim, Pool, Device, ShareID string
}

// ShareMemory is what the DRA plugin prepared for a share: the device
// memory it was allocated, 0 when the claim asked for none, and the
// resource (pool) of its card.
type ShareMemory struct {
	Bytes    int64
	Resource string
}

// MemorySource tells the device memory of a share. *DRACheckpoint
// satisfies it. found is false when no prepared share matches.
type MemorySource interface {
	ShareMemory(s Share) (mem ShareMemory, found bool, err error)
}

// MemoryPolicy says which pools require an enforced limit.
// *config.Config satisfies it.
type MemoryPolicy interface {
	RequiresMemoryLimit(resource string) bool
}

// DRACheckpoint reads dri-cdi-dra's checkpoint on the host (root-owned,
// 0600): the amounts in it are the consumedCapacity of the claim's
// allocation, which the scheduler wrote, so nothing in it comes from a
// pod author. A share is matched by claim namespace and name, pool,
// device and share ID, as PodResources reports them; the share ID is
// the scheduler's unique ID of the allocation. The decoded file is
// kept while its size, modification time and inode stay the same.
type DRACheckpoint struct {
	path string

	mu     sync.Mutex
	stamp  filekey.Key
	claims map[string]dracheckpoint.Claim
}

// NewDRACheckpoint reads the DRA checkpoint at path.
func NewDRACheckpoint(path string) *DRACheckpoint { return &DRACheckpoint{path: path} }

// ShareMemory implements MemorySource. A missing file holds no shares;
// a file that cannot be read or is corrupt is an error naming it.
func (c *DRACheckpoint) ShareMemory(s Share) (ShareMemory, bool, error) {
	claims, err := c.load()
	if err != nil {
		return ShareMemory{}, false, err
	}
	for _, pc := range claims {
		if pc.Namespace != s.Namespace || pc.Name != s.Claim {
			continue
		}
		for _, d := range pc.Devices {
			if d.Pool == s.Pool && d.Device == s.Device && d.ShareID == s.ShareID {
				return ShareMemory{Bytes: d.Memory, Resource: d.Resource}, true, nil
			}
		}
	}
	return ShareMemory{}, false, nil
}

func (c *DRACheckpoint) load() (map[string]dracheckpoint.Claim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := os.Stat(c.path)
	if errors.Is(err, os.ErrNotExist) {
		c.claims = nil
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("DRA checkpoint: %w", err)
	}
	stamp := filekey.Of(st)
	if c.claims != nil && stamp == c.stamp {
		return c.claims, nil
	}
	claims, err := dracheckpoint.Load(c.path)
	if err != nil {
		return nil, err
	}
	c.claims, c.stamp = claims, stamp
	return claims, nil
}

// memoryLimits holds what the memory part of the plugin needs.
type memoryLimits struct {
	source     MemorySource
	policy     MemoryPolicy
	cgroupRoot string
	// warned holds "<card> <reason>" pairs already logged: an
	// unenforceable limit is logged once per card and reason.
	warned sync.Map
}

// cardMemory is the device memory a container's shares of one card were
// allocated, and whether its pool requires the limit.
type cardMemory struct {
	card     string
	bytes    int64
	required bool
}

// containerMemory sums the device memory of the container's shares of
// our driver, by card, for the granted cards only. Shares without
// memory are left out: nothing is ever limited to 0.
func (m *memoryLimits) containerMemory(claims []podresources.ClaimDevice, granted []string, kind string) ([]cardMemory, error) {
	if m == nil || m.source == nil {
		return nil, nil
	}
	ok := map[string]bool{}
	for _, c := range granted {
		ok[c] = true
	}
	byCard := map[string]*cardMemory{}
	seen := map[Share]bool{}
	for _, d := range claims {
		if d.Driver != config.DRADriver || d.ShareID == "" {
			continue
		}
		s := Share{Namespace: d.Namespace, Claim: d.Claim, Pool: d.Pool, Device: d.Device, ShareID: d.ShareID}
		if seen[s] {
			continue
		}
		seen[s] = true
		cards := claimedCards([]podresources.ClaimDevice{d}, kind)
		if len(cards) != 1 {
			continue
		}
		var card string
		for c := range cards {
			card = c
		}
		if !ok[card] {
			continue
		}
		mem, found, err := m.source.ShareMemory(s)
		if err != nil {
			return nil, fmt.Errorf("%w: device memory of share %s of claim %s/%s: %w", ErrUnconfirmed, s.ShareID, s.Namespace, s.Claim, err)
		}
		if !found || mem.Bytes <= 0 {
			continue
		}
		cm := byCard[card]
		if cm == nil {
			cm = &cardMemory{card: card}
			byCard[card] = cm
		}
		cm.bytes += mem.Bytes
		cm.required = cm.required || (m.policy != nil && m.policy.RequiresMemoryLimit(mem.Resource))
	}
	out := make([]cardMemory, 0, len(byCard))
	for _, cm := range byCard {
		out = append(out, *cm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].card < out[j].card })
	return out, nil
}

// limits returns the dmem.max limits of the cards whose memory the node
// can limit for this container, and why each other card's cannot. The
// cgroup root is read only here, for a container with memory; a root
// that cannot be read makes every card unenforceable (ReasonUnreadable).
func (m *memoryLimits) limits(cards []cardMemory, cgroupsPath string) ([]dmem.Limit, []*dmem.Unenforceable) {
	var out []dmem.Limit
	var why []*dmem.Unenforceable
	host, err := dmem.ReadHost(m.cgroupRoot)
	if err != nil {
		for _, c := range cards {
			why = append(why, &dmem.Unenforceable{Card: c.card, Reason: dmem.ReasonUnreadable, Detail: err.Error()})
		}
		return nil, why
	}
	for _, c := range cards {
		regions, u := host.CardEnforceable(c.card)
		if u == nil {
			u = host.Delegated(c.card, cgroupsPath)
		}
		if u != nil {
			why = append(why, u)
			continue
		}
		out = append(out, dmem.Split(regions, c.bytes)...)
	}
	return out, why
}

// applyMemory adds dmem.max to adj (creating it when nil) for the
// container's shares with device memory, where the node enforces it.
// A card whose limit cannot be enforced is logged once per card and
// reason and counted; when its pool requires the limit, the container
// fails (an error wrapping ErrMemoryLimit that names the card and the
// reason).
func (p *Plugin) applyMemory(adj *api.ContainerAdjustment, log *logrus.Entry, ctr *api.Container, claims []podresources.ClaimDevice, granted []string) (*api.ContainerAdjustment, string, error) {
	cards, err := p.memory.containerMemory(claims, granted, p.kind)
	if err != nil || len(cards) == 0 {
		return adj, reasonUnconfirmed, err
	}
	limits, why := p.memory.limits(cards, ctr.GetLinux().GetCgroupsPath())
	required := map[string]bool{}
	for _, c := range cards {
		required[c.card] = c.required
	}
	var failed []*dmem.Unenforceable
	for _, u := range why {
		p.metrics.memoryUnenforceable.WithLabelValues(u.Reason).Inc()
		if required[u.Card] {
			failed = append(failed, u)
			continue
		}
		if _, dup := p.memory.warned.LoadOrStore(u.Card+" "+u.Reason, true); !dup {
			log.WithFields(logrus.Fields{"card": u.Card, "reason": u.Reason}).Warn(
				u.Error() + "; the container starts without a device memory limit (logged once per card and reason)")
		}
	}
	if len(failed) > 0 {
		msgs := make([]string, len(failed))
		for i, e := range failed {
			msgs[i] = e.Error()
		}
		return adj, reasonMemoryLimit, fmt.Errorf("%w (the pool sets requireMemoryLimit): %s", ErrMemoryLimit, strings.Join(msgs, "; "))
	}
	if len(limits) == 0 {
		return adj, "", nil
	}
	if adj == nil {
		adj = &api.ContainerAdjustment{}
	}
	value := dmem.Value(limits)
	adj.AddLinuxUnified(dmem.MaxFile, value)
	p.metrics.memoryLimited.Inc()
	log.WithField(dmem.MaxFile, value).Info("set the container's device memory limit")
	return adj, "", nil
}
