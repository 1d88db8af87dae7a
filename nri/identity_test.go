package nri_test

import (
	"context"
	"io"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
)

// fakeHost is the host's device nodes by path, for HostStat; a path it
// does not hold does not exist.
type fakeHost struct {
	mu    sync.Mutex
	nodes map[string]nri.HostDevice
}

func (h *fakeHost) stat(p string) (nri.HostDevice, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, ok := h.nodes[p]
	if !ok {
		return nri.HostDevice{}, fs.ErrNotExist
	}
	return d, nil
}

func (h *fakeHost) set(p string, d *nri.HostDevice) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d == nil {
		delete(h.nodes, p)
		return
	}
	h.nodes[p] = *d
}

// hostOf is a host that matches the nodes exactly.
func hostOf(cards map[string][]drm.DeviceNode) *fakeHost {
	h := &fakeHost{nodes: map[string]nri.HostDevice{}}
	for _, nodes := range cards {
		for _, n := range nodes {
			h.nodes[n.HostPath] = nri.HostDevice{Char: true, Major: n.Major, Minor: n.Minor}
		}
	}
	return h
}

// specHost is the host of the shared rig: exactly what specs describe.
var specHost = hostOf(specs)

// identityRig is a plugin over a store and host of its own, called in
// process; cards map to their nodes as the agent's specs give them.
type identityRig struct {
	plugin  *nri.Plugin
	store   *nri.SpecIndex
	host    *fakeHost
	kubelet *podresourcestest.Server
	mu      sync.Mutex
	cards   map[string][]drm.DeviceNode
	loads   int
}

func newIdentityRig(t *testing.T, cards map[string][]drm.DeviceNode, host *fakeHost, owner ...nri.CharOwner) *identityRig {
	t.Helper()
	r := &identityRig{host: host, cards: cards}
	var err error
	r.kubelet, err = podresourcestest.Start(filepath.Join(kubelettest.ShortDir(t), "k.sock"))
	require.NoError(t, err)
	t.Cleanup(r.kubelet.Stop)
	client := newClient(t, r.kubelet.Socket())
	log := discard()
	r.store = nri.NewSpecIndex(t.TempDir(), kind, func(string, string) (map[string][]drm.DeviceNode, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.loads++
		out := make(map[string][]drm.DeviceNode, len(r.cards))
		for k, v := range r.cards {
			out[k] = v
		}
		return out, nil
	}, nil, log)
	require.NoError(t, r.store.Reload())
	r.plugin, err = nri.New(nri.Config{
		Kind: kind, Resources: served{resI915: true}, Authorizer: client, Devices: r.store, Log: log,
		HostStat: host.stat, Owner: firstOwner(owner),
	})
	require.NoError(t, err)
	return r
}

func (r *identityRig) setCards(cards map[string][]drm.DeviceNode) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cards = cards
}

func (r *identityRig) loadCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loads
}

func (r *identityRig) create(ctr *api.Container) (*api.ContainerAdjustment, error) {
	adj, _, err := r.plugin.CreateContainer(context.Background(), pod("gpu"), ctr)
	return adj, err
}

// cardNodes is a card's nodes as the agent writes them: card, render
// and the two by-path links (host path: the node they point to).
func cardNodes(id string, card, render uint32) []drm.DeviceNode {
	c := "/dev/dri/card" + itoa(card)
	rn := "/dev/dri/renderD" + itoa(render)
	return []drm.DeviceNode{
		{Path: c, HostPath: c, Major: 226, Minor: card},
		{Path: rn, HostPath: rn, Major: 226, Minor: render},
		{Path: "/dev/dri/by-path/pci-" + id + "-card", HostPath: c, Major: 226, Minor: card},
		{Path: "/dev/dri/by-path/pci-" + id + "-render", HostPath: rn, Major: 226, Minor: render},
	}
}

// hostWith is the host udev makes for bound cards: nodes and by-path
// links (stat follows the links).
func hostWith(cards map[string][2]uint32) *fakeHost {
	h := &fakeHost{nodes: map[string]nri.HostDevice{}}
	for id, mm := range cards {
		for _, n := range cardNodes(id, mm[0], mm[1]) {
			h.nodes[n.Path] = nri.HostDevice{Char: true, Major: 226, Minor: n.Minor}
		}
	}
	return h
}

const (
	cardX = "0000:01:00.0"
	cardY = "0000:02:00.0"
)

// TestRenumberedCardIsNeverHandedOver is the sequence of an unbind and a
// re-probe: X held card0/renderD128, X unbinds, Y takes card0/renderD128.
// Whatever the store still says about X, X's container never gets Y's
// numbers, and fails with an error naming X and the reason.
func TestRenumberedCardIsNeverHandedOver(t *testing.T) {
	before := map[string][]drm.DeviceNode{cardX: cardNodes(cardX, 0, 128), cardY: cardNodes(cardY, 1, 129)}
	// After the unbind and Y's re-probe the host has Y at X's old numbers.
	afterHost := map[string][2]uint32{cardY: {0, 128}}

	tests := map[string]struct {
		store  map[string][]drm.DeviceNode // the store when the container restarts
		env    []string                    // what the runtime's CDI injection set
		reason []string                    // error substrings
	}{
		"stale store: the by-path link of X is gone": {
			store:  before,
			reason: []string{"device node does not match the host", cardX, "by-path/pci-" + cardX + "-card"},
		},
		"agent wrote X's spec without nodes": {
			store:  map[string][]drm.DeviceNode{cardX: {}, cardY: cardNodes(cardY, 0, 128)},
			reason: []string{"card unavailable", cardX, "is not bound to a driver", "may belong to another card"},
		},
		"runtime resolved X's unavailable spec, store still stale": {
			store:  before,
			env:    []string{"PATH=/bin", cdi.UnavailableEnv + "=" + cardX},
			reason: []string{"card unavailable", cardX},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newIdentityRig(t, tc.store, hostWith(afterHost))
			r.kubelet.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {resI915: {cardX}}})
			ctr := container("app", asks(resI915, cardX), cdiNames(cardX))
			ctr.Env = tc.env
			adj, err := r.create(ctr)
			require.Nil(t, adj, "nothing may be injected")
			require.Error(t, err)
			for _, s := range tc.reason {
				require.ErrorContains(t, err, s)
			}
		})
	}
}

// Without by-path links (no udev rule for them), a renumbering that
// changes the numbers at a path is caught by the node itself.
func TestHostNumbersMismatch(t *testing.T) {
	store := map[string][]drm.DeviceNode{cardX: cardNodes(cardX, 0, 128)[:2]}
	host := hostOf(store)
	r := newIdentityRig(t, store, host)
	r.kubelet.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {resI915: {cardX}}})

	adj, err := r.create(container("app", asks(resI915, cardX)))
	require.NoError(t, err)
	require.Len(t, adj.GetLinux().GetDevices(), 2)

	host.set("/dev/dri/renderD128", &nri.HostDevice{Char: true, Major: 226, Minor: 129})
	_, err = r.create(container("app", asks(resI915, cardX)))
	require.ErrorContains(t, err, "renderD128 should be 226:128, but host /dev/dri/renderD128 is 226:129")

	host.set("/dev/dri/renderD128", &nri.HostDevice{})
	_, err = r.create(container("app", asks(resI915, cardX)))
	require.ErrorContains(t, err, "is not a char device")

	host.set("/dev/dri/renderD128", nil)
	_, err = r.create(container("app", asks(resI915, cardX)))
	require.ErrorContains(t, err, "host /dev/dri/renderD128: file does not exist")
}

func firstOwner(o []nri.CharOwner) nri.CharOwner {
	if len(o) == 0 {
		return nil
	}
	return o[0]
}

// A card without by-path links (or with a spec that could not be
// rewritten on a read-only spec dir) whose numbers another card took:
// the host paths hold the spec's numbers, so only the kernel's record of
// which card the numbers belong to (<sysfs>/dev/char) tells them apart.
func TestNumbersOfAnotherCardAreRefusedWithoutByPathLinks(t *testing.T) {
	store := map[string][]drm.DeviceNode{cardX: cardNodes(cardX, 0, 128)[:2]} // no by-path links
	host := hostOf(store)
	owners := map[uint32]string{0: cardX, 128: cardX}
	var mu sync.Mutex
	owner := func(major, minor uint32) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		id, ok := owners[minor]
		if !ok || major != 226 {
			return "", fs.ErrNotExist
		}
		return id, nil
	}
	r := newIdentityRig(t, store, host, owner)
	r.kubelet.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {resI915: {cardX}}})
	adj, err := r.create(container("app", asks(resI915, cardX)))
	require.NoError(t, err)
	require.Len(t, adj.GetLinux().GetDevices(), 2)

	// X unbinds, Y takes card0/renderD128; X's spec still names them.
	mu.Lock()
	owners[0], owners[128] = cardY, cardY
	mu.Unlock()
	_, err = r.create(container("app", asks(resI915, cardX)))
	require.ErrorContains(t, err, "device node does not match the host: card "+cardX+": node /dev/dri/card0 is 226:0, which the kernel has registered for "+cardY+" now")

	// Nobody holds them: refused too.
	mu.Lock()
	delete(owners, 0)
	delete(owners, 128)
	mu.Unlock()
	_, err = r.create(container("app", asks(resI915, cardX)))
	require.ErrorContains(t, err, "device node does not match the host: card "+cardX+": node /dev/dri/card0 (226:0): file does not exist")
}

// The owner of a number is looked up once per card: the by-path links
// repeat the card and render nodes' numbers.
func TestOwnerLookedUpOncePerNumber(t *testing.T) {
	store := map[string][]drm.DeviceNode{cardX: cardNodes(cardX, 0, 128)}
	var mu sync.Mutex
	var calls []uint32
	owner := func(_, minor uint32) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, minor)
		return cardX, nil
	}
	r := newIdentityRig(t, store, hostWith(map[string][2]uint32{cardX: {0, 128}}), owner)
	r.kubelet.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {resI915: {cardX}}})
	adj, err := r.create(container("app", asks(resI915, cardX)))
	require.NoError(t, err)
	require.Len(t, adj.GetLinux().GetDevices(), 4)
	require.ElementsMatch(t, []uint32{0, 128}, calls)
}

// /dev/kfd is shared by every amdgpu card and not under the host's
// /dev/dri the plugin sees: it is not checked, the DRM nodes are.
func TestSharedExtraNodeIsNotChecked(t *testing.T) {
	nodes := append(cardNodes(cardX, 0, 128), drm.DeviceNode{Path: "/dev/kfd", HostPath: "/dev/kfd", Major: 235, Minor: 0})
	store := map[string][]drm.DeviceNode{cardX: nodes}
	r := newIdentityRig(t, store, hostWith(map[string][2]uint32{cardX: {0, 128}}))
	r.kubelet.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {resI915: {cardX}}})
	adj, err := r.create(container("app", asks(resI915, cardX)))
	require.NoError(t, err)
	require.Len(t, adj.GetLinux().GetDevices(), 5)
}

// A card missing from the store (a hotplug the watch has not delivered
// yet) is reloaded once; a burst of containers shares that reload.
func TestMissingCardIsReloadedOnce(t *testing.T) {
	r := newIdentityRig(t, map[string][]drm.DeviceNode{}, hostWith(map[string][2]uint32{cardX: {0, 128}}))
	r.kubelet.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {resI915: {cardX}}})
	loads := r.loadCount()

	// Still missing after the reload: one reload, then the error.
	_, err := r.create(container("app", asks(resI915, cardX)))
	require.ErrorContains(t, err, "card not described by the CDI specs: card "+cardX)
	require.Equal(t, loads+1, r.loadCount())

	// The agent wrote the spec, the watch did not deliver it yet.
	r.setCards(map[string][]drm.DeviceNode{cardX: cardNodes(cardX, 0, 128)})
	adj, err := r.create(container("app", asks(resI915, cardX)))
	require.NoError(t, err)
	require.Len(t, adj.GetLinux().GetDevices(), 4)
	require.Equal(t, loads+2, r.loadCount())

	// Known now: no reload.
	_, err = r.create(container("app", asks(resI915, cardX)))
	require.NoError(t, err)
	require.Equal(t, loads+2, r.loadCount())
}

// A refresh that outlives its caller's deadline reports it.
func TestRefreshBoundedByTheCaller(t *testing.T) {
	block := make(chan struct{})
	slow := nri.NewSpecIndex(t.TempDir(), kind, func(string, string) (map[string][]drm.DeviceNode, error) {
		<-block
		return nil, nil
	}, nil, discard())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, slow.Refresh(ctx), context.DeadlineExceeded)
	close(block)
}

func discard() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

func newClient(t *testing.T, sock string) *podresources.Client {
	c, err := podresources.New(sock, podresources.WithTimeout(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// staleInjection is what the runtime's CDI injection adds for a card from
// a copy of the specs older than the plugin's: the card's nodes at the
// numbers it had before a renumbering.
func staleInjection(nodes []drm.DeviceNode) ctrOpt {
	return func(c *api.Container) {
		if c.Linux == nil {
			c.Linux = &api.LinuxContainer{}
		}
		for _, n := range nodes {
			c.Linux.Devices = append(c.Linux.Devices, &api.LinuxDevice{Path: n.Path, Type: "c", Major: int64(n.Major), Minor: int64(n.Minor)})
		}
	}
}

// The runtime resolves CDI names from its own cache of the specs. When
// that cache is older than the plugin's (X moved from card0/renderD128 to
// card1/renderD129, and Y took X's old numbers), the runtime gives X's
// container Y's nodes at X's old paths. The plugin would only add X's new
// nodes next to them, so it checks the nodes already there: Y's fail the
// container, whether the kernel's record (owner check on) or our specs
// (owner check off) name Y.
func TestStaleRuntimeInjectionIsRefused(t *testing.T) {
	store := map[string][]drm.DeviceNode{cardX: cardNodes(cardX, 1, 129)[:2], cardY: cardNodes(cardY, 0, 128)[:2]}
	old := cardNodes(cardX, 0, 128)[:2]
	kernel := func(major, minor uint32) (string, error) {
		switch {
		case major == 226 && (minor == 0 || minor == 128):
			return cardY, nil
		case major == 226 && (minor == 1 || minor == 129):
			return cardX, nil
		}
		return "", fs.ErrNotExist
	}
	allowAll := func(c *api.Container) {
		c.Linux.Resources = &api.LinuxResources{Devices: []*api.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}}
	}
	owners := map[string][]nri.CharOwner{"owner check on": {kernel}, "owner check off": nil}
	for name, owner := range owners {
		t.Run(name, func(t *testing.T) {
			r := newIdentityRig(t, store, hostOf(store), owner...)
			r.kubelet.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {resI915: {cardX}}})

			adj, err := r.create(container("app", asks(resI915, cardX), cdiNames(cardX), staleInjection(old)))
			require.Nil(t, adj, "nothing may be injected")
			require.ErrorContains(t, err, "device node does not match the host: the runtime gave the container /dev/dri/card0 (226:0), a node of card "+cardY+", which is not allocated to it")
			require.ErrorContains(t, err, "allocated: "+cardX)
			require.ErrorContains(t, err, "default/gpu")

			// The runtime's copy is current: X's own nodes are verified.
			adj, err = r.create(container("app", asks(resI915, cardX), cdiNames(cardX), staleInjection(store[cardX])))
			require.NoError(t, err)
			require.Nil(t, adj)

			// Numbers no card of ours has are not ours to judge.
			foreign := []drm.DeviceNode{{Path: "/dev/dri/renderD200", Major: 226, Minor: 200}}
			adj, err = r.create(container("app", asks(resI915, cardX), staleInjection(foreign)))
			require.NoError(t, err)
			require.Len(t, adj.GetLinux().GetDevices(), 2)

			// A privileged container has every host node.
			adj, err = r.create(container("app", asks(resI915, cardX), staleInjection(append(store[cardX], store[cardY]...)), allowAll))
			require.NoError(t, err)
			require.Nil(t, adj)
		})
	}

}

// An accel device is checked like a card: its node under /dev/accel has
// no by-path link, so the host node and the kernel's owner of its
// number decide. When another accel device took the number, the NPU's
// name is refused.
func TestAccelNodeOwnerChecked(t *testing.T) {
	const npu, other, resNPU = "0000:00:0b.0", "fdab0000.npu", resI915 // the pool name is the rig's
	nodes := []drm.DeviceNode{{Path: "/dev/accel/accel0", HostPath: "/dev/accel/accel0", Major: drm.AccelMajor, Minor: 0}}
	store := map[string][]drm.DeviceNode{npu: nodes}
	var mu sync.Mutex
	owners := map[[2]uint32]string{{drm.AccelMajor, 0}: npu}
	var asked [][2]uint32
	owner := func(major, minor uint32) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, [2]uint32{major, minor})
		id, ok := owners[[2]uint32{major, minor}]
		if !ok {
			return "", fs.ErrNotExist
		}
		return id, nil
	}
	r := newIdentityRig(t, store, hostOf(store), owner)
	r.kubelet.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {resNPU: {npu}}})
	adj, err := r.create(container("app", asks(resNPU, npu)))
	require.NoError(t, err)
	require.Len(t, adj.GetLinux().GetDevices(), 1)
	require.Equal(t, "/dev/accel/accel0", adj.GetLinux().GetDevices()[0].GetPath())
	require.Equal(t, [][2]uint32{{drm.AccelMajor, 0}}, asked)

	mu.Lock()
	owners[[2]uint32{drm.AccelMajor, 0}] = other
	mu.Unlock()
	_, err = r.create(container("app", asks(resNPU, npu)))
	require.ErrorContains(t, err, "card "+npu+": node /dev/accel/accel0 is 261:0, which the kernel has registered for "+other+" now")
}
