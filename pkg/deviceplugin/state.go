package deviceplugin

import (
	"errors"
	"fmt"
	"slices"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// NameFunc returns the fully qualified CDI device name of a card, e.g.
// "dri-cdi.dev/gpu=0000:00:02.0".
type NameFunc func(cardID string) string

// Sentinel errors of Allocate; the gRPC error wraps their text.
var (
	// ErrEmptyRequest is a container request without device IDs.
	ErrEmptyRequest = errors.New("no device IDs requested")
	// ErrUnknownDevice is a device ID this resource does not advertise.
	ErrUnknownDevice = errors.New("unknown device")
	// ErrUnhealthyDevice is a device whose card is unhealthy.
	ErrUnhealthyDevice = errors.New("unhealthy device")
	// ErrDuplicateDevice is a device ID requested twice.
	ErrDuplicateDevice = errors.New("device requested twice")
	// ErrSameCard is two replicas of one card for one container while the
	// pool does not allow it.
	ErrSameCard = errors.New("two replicas of one card in one container")
)

// errorReason is the metrics label of an Allocate error.
func errorReason(err error) string {
	switch {
	case errors.Is(err, ErrEmptyRequest):
		return "empty_request"
	case errors.Is(err, ErrUnknownDevice):
		return "unknown_device"
	case errors.Is(err, ErrUnhealthyDevice):
		return "unhealthy_device"
	case errors.Is(err, ErrDuplicateDevice):
		return "duplicate_device"
	case errors.Is(err, ErrSameCard):
		return "same_card"
	}
	return "other"
}

// cardEntry is what Allocate needs of a card, computed when the inventory
// changes so that Allocate touches no filesystem.
type cardEntry struct {
	id      string
	numa    int
	healthy bool
	cdi     *pluginapi.CDIDevice
	specs   []*pluginapi.DeviceSpec
	// replicas is the number of device IDs of this card.
	replicas int
}

// device is one advertised kubelet device.
type device struct {
	id      string
	card    *cardEntry
	replica int
}

// state is an immutable snapshot of one resource's devices. The gRPC
// handlers read it without locks.
type state struct {
	resource string
	// annotationKey is alloc.AnnotationKey(resource), computed once per
	// snapshot instead of on every Allocate.
	annotationKey string
	allowSame     bool
	list          *pluginapi.ListAndWatchResponse
	devices       map[string]*device
	// changed is closed when a state with a different device list
	// replaces this one.
	changed chan struct{}
}

// buildState computes the snapshot of a pool. Cards named in unhealthy
// are advertised Unhealthy.
func buildState(pool config.Pool, unhealthy map[string]bool, delivery Delivery, name NameFunc) *state {
	st := &state{
		resource:      pool.Resource,
		annotationKey: alloc.AnnotationKey(pool.Resource),
		allowSame:     pool.AllowSameCardReplicas,
		list:          &pluginapi.ListAndWatchResponse{Devices: []*pluginapi.Device{}},
		devices:       map[string]*device{},
	}
	replicas := max(pool.Replicas, 1)
	for i := range pool.Cards {
		c := &pool.Cards[i]
		ce := &cardEntry{id: c.ID, numa: c.NUMANode, healthy: !unhealthy[c.ID], replicas: replicas}
		switch delivery {
		case DeliveryCDICRI:
			ce.cdi = &pluginapi.CDIDevice{Name: name(c.ID)}
		case DeliveryDeviceSpecs:
			ce.specs = deviceSpecs(c)
		}
		health := pluginapi.Healthy
		if !ce.healthy {
			health = pluginapi.Unhealthy
		}
		var topo *pluginapi.TopologyInfo
		if c.NUMANode >= 0 {
			topo = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(c.NUMANode)}}}
		}
		for n := range replicas {
			id := c.ID
			if replicas > 1 {
				id = alloc.ReplicaID(c.ID, n)
			}
			st.devices[id] = &device{id: id, card: ce, replica: n}
			st.list.Devices = append(st.list.Devices, &pluginapi.Device{ID: id, Health: health, Topology: topo})
		}
	}
	slices.SortFunc(st.list.Devices, func(a, b *pluginapi.Device) int {
		return compareDeviceIDs(a.ID, b.ID)
	})
	return st
}

// compareDeviceIDs orders by card ID, then replica number (so ::2 comes
// before ::10).
func compareDeviceIDs(a, b string) int {
	ca, ra, _ := alloc.ParseDeviceID(a)
	cb, rb, _ := alloc.ParseDeviceID(b)
	if ca != cb {
		if ca < cb {
			return -1
		}
		return 1
	}
	return ra - rb
}

// deviceSpecs lists every node of the card for the kubelet. Each node is
// handed over by the host path that names the card for good: its
// /dev/dri/by-path link (udev names it after the PCI or platform
// device), not /dev/dri/cardN. The kubelet checkpoints these specs and
// reuses them when a container restarts, without calling Allocate;
// containerd resolves the link at each container creation
// (internal/cri/opts/spec_linux_opts.go, WithDevices:
// osi.ResolveSymbolicLink(device.HostPath), then oci.WithDevices stats
// the target), so a restarted container gets the card's current node,
// and fails to be created while the card is unbound and its link gone,
// instead of getting whatever card now holds the old cardN. A node
// without a by-path link keeps its own path.
func deviceSpecs(c *drm.Card) []*pluginapi.DeviceSpec {
	link := map[[2]uint32]string{}
	for _, n := range c.ByPath {
		k := [2]uint32{n.Major, n.Minor}
		if _, ok := link[k]; !ok {
			link[k] = n.HostPath
		}
	}
	stable := func(n drm.DeviceNode) string {
		if l, ok := link[[2]uint32{n.Major, n.Minor}]; ok {
			return l
		}
		return n.HostPath
	}
	var specs []*pluginapi.DeviceSpec
	add := func(n drm.DeviceNode, host string) {
		specs = append(specs, &pluginapi.DeviceSpec{ContainerPath: n.Path, HostPath: host, Permissions: "rw"})
	}
	for _, n := range c.DRMNodes() {
		add(n, stable(n))
	}
	for _, n := range c.Extra {
		add(n, n.HostPath)
	}
	for _, n := range c.ByPath {
		add(n, n.HostPath)
	}
	return specs
}

// allocate answers one container request from the snapshot.
func (st *state) allocate(ids []string, delivery Delivery) (*pluginapi.ContainerAllocateResponse, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w for %s", ErrEmptyRequest, st.resource)
	}
	seen := make(map[string]bool, len(ids))
	cardOf := make(map[string]string, len(ids)) // card ID -> first device ID
	cards := make([]*cardEntry, 0, len(ids))
	for _, id := range ids {
		d := st.devices[id]
		switch {
		case d == nil:
			return nil, fmt.Errorf("%w %q for %s", ErrUnknownDevice, id, st.resource)
		case !d.card.healthy:
			return nil, fmt.Errorf("%w %q for %s: its card is unbound or its nodes are gone", ErrUnhealthyDevice, id, st.resource)
		case seen[id]:
			return nil, fmt.Errorf("%w: %q for %s", ErrDuplicateDevice, id, st.resource)
		}
		seen[id] = true
		if first, dup := cardOf[d.card.id]; dup {
			if !st.allowSame {
				return nil, fmt.Errorf("%w: %q and %q are replicas of card %s; set allowSameCardReplicas for %s to permit it",
					ErrSameCard, first, id, d.card.id, st.resource)
			}
			continue
		}
		cardOf[d.card.id] = id
		cards = append(cards, d.card)
	}
	slices.SortFunc(cards, func(a, b *cardEntry) int {
		if a.id < b.id {
			return -1
		}
		return 1
	})
	resp := &pluginapi.ContainerAllocateResponse{Annotations: map[string]string{st.annotationKey: alloc.AnnotationValue(st.resource, ids)}}
	switch delivery {
	case DeliveryCDICRI:
		for _, c := range cards {
			resp.CdiDevices = append(resp.CdiDevices, c.cdi)
		}
	case DeliveryDeviceSpecs:
		paths := map[string]bool{}
		for _, c := range cards {
			for _, s := range c.specs {
				// Cards of one driver can share a node (/dev/kfd).
				if !paths[s.ContainerPath] {
					paths[s.ContainerPath] = true
					resp.Devices = append(resp.Devices, s)
				}
			}
		}
	}
	return resp, nil
}
