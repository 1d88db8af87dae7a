package nri

import (
	"context"
	"fmt"
	"io/fs"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// identityWorld is one randomly drawn node: cards with the nodes the spec
// store holds for them, what the host holds at each path now, what the
// kubelet allocated, and what the container asks for.
type identityWorld struct {
	store     map[string][]drm.DeviceNode
	host      map[string]HostDevice
	allocated map[string][]string
	ctr       *api.Container
}

// byteSource hands out fuzz bytes, then zeros.
type byteSource []byte

func (b *byteSource) next() byte {
	if len(*b) == 0 {
		return 0
	}
	v := (*b)[0]
	*b = (*b)[1:]
	return v
}

var fuzzCards = []string{"0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "vkms"}

// drawWorld builds a world from data. Cards share a small pool of minors,
// so renumbered and conflicting hosts, stale stores and unavailable cards
// all occur.
func drawWorld(data []byte) identityWorld {
	src := byteSource(data)
	w := identityWorld{store: map[string][]drm.DeviceNode{}, host: map[string]HostDevice{}, allocated: map[string][]string{}}
	for _, id := range fuzzCards {
		switch src.next() % 4 {
		case 0: // not in the store
			continue
		case 1: // unavailable: spec without nodes
			w.store[id] = []drm.DeviceNode{}
			continue
		}
		card, render := uint32(src.next()%3), uint32(128+src.next()%3)
		c, r := fmt.Sprintf("/dev/dri/card%d", card), fmt.Sprintf("/dev/dri/renderD%d", render)
		nodes := []drm.DeviceNode{
			{Path: c, HostPath: c, Major: 226, Minor: card},
			{Path: r, HostPath: r, Major: 226, Minor: render},
		}
		if src.next()%2 == 0 {
			nodes = append(nodes,
				drm.DeviceNode{Path: "/dev/dri/by-path/pci-" + id + "-card", HostPath: c, Major: 226, Minor: card},
				drm.DeviceNode{Path: "/dev/dri/by-path/pci-" + id + "-render", HostPath: r, Major: 226, Minor: render})
		}
		w.store[id] = nodes
	}
	// The host: each path of the pool holds some minor, or nothing; each
	// card's by-path links exist or not, pointing at some minor.
	for i := range 3 {
		for _, p := range []struct {
			path string
			base uint32
		}{{fmt.Sprintf("/dev/dri/card%d", i), 0}, {fmt.Sprintf("/dev/dri/renderD%d", 128+i), 128}} {
			if v := src.next() % 5; v < 3 {
				w.host[p.path] = HostDevice{Char: true, Major: 226, Minor: p.base + uint32(v)}
			} else if v == 3 {
				w.host[p.path] = HostDevice{} // not a char device
			}
		}
	}
	for _, id := range fuzzCards {
		for _, kind := range []string{"card", "render"} {
			if v := src.next() % 4; v < 3 {
				base := uint32(0)
				if kind == "render" {
					base = 128
				}
				w.host["/dev/dri/by-path/pci-"+id+"-"+kind] = HostDevice{Char: true, Major: 226, Minor: base + uint32(v)}
			}
		}
	}
	// The kubelet allocates some cards, the container asks for some in its
	// allocation annotation and
	// names some in CDIDevices, cdi.k8s.io annotations, and env markers.
	var alloced, asked []string
	ctr := &api.Container{Name: "app", Annotations: map[string]string{}}
	for _, id := range fuzzCards {
		bits := src.next()
		if bits&1 != 0 {
			alloced = append(alloced, id)
		}
		if bits&2 != 0 {
			asked = append(asked, id)
		}
		if bits&4 != 0 {
			ctr.CDIDevices = append(ctr.CDIDevices, &api.CDIDevice{Name: cdi.QualifiedName(testKind, id)})
		}
		if bits&8 != 0 {
			ctr.Annotations["cdi.k8s.io/p"+id] = cdi.QualifiedName(testKind, id)
		}
		if bits&16 != 0 {
			ctr.Env = append(ctr.Env, cdi.UnavailableEnv+"="+id)
		}
	}
	if len(alloced) > 0 {
		w.allocated[resI915] = alloced
	}
	if len(asked) > 0 {
		k, v := alloc.Annotation(resI915, asked)
		ctr.Annotations[k] = v
	}
	w.ctr = ctr
	return w
}

func (w identityWorld) stat(p string) (HostDevice, error) {
	d, ok := w.host[p]
	if !ok {
		return HostDevice{}, fs.ErrNotExist
	}
	return d, nil
}

// FuzzIdentityAuthorization runs the whole decision of one CreateContainer
// (parse, authorize with the kubelet's allocation, check each node against
// the host, build the adjustment) on drawn worlds. Whatever it injects is
// a subset of the allocated cards' nodes, each of which matches the host
// at its path (and at its by-path link) at this moment, and nothing of a
// card without nodes or marked unavailable is ever injected.
func FuzzIdentityAuthorization(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{2, 0, 0, 0, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3})
	f.Add([]byte{3, 0, 0, 1, 3, 0, 0, 1, 1, 1, 0, 0, 1, 0, 2, 0, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 7, 0, 0})
	f.Add([]byte{1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x17, 0x13, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		w := drawWorld(data)
		req, err := parseRequest(w.ctr, testKind, testServed)
		require.NoError(t, err, "drawn requests are well formed")
		if req.empty() {
			return
		}
		dec, err := authorize(req, w.allocated, testServed)
		if err != nil {
			require.ErrorIs(t, err, ErrNotAllocated)
			return
		}
		allowed := map[string]bool{}
		for _, id := range w.allocated[resI915] {
			allowed[id] = true
		}
		for _, c := range dec.cards {
			require.True(t, allowed[c], "card %s decided but not allocated", c)
		}
		if len(dec.cards) == 0 {
			return
		}
		src := fixedSource(w.store)
		checked, err := checkedNodes(context.Background(), dec.cards, w.ctr.GetEnv(), src, hostCheck{stat: w.stat})
		if err != nil {
			return // the container fails: nothing is injected
		}
		adj, added, err := deviceAdjustment(w.ctr, dec.cards, checked)
		if err != nil {
			return
		}
		marked := map[string]bool{}
		for _, e := range w.ctr.GetEnv() {
			if id, ok := cdi.UnavailableCard([]string{e}); ok {
				marked[id] = true
			}
		}
		// Every added node is a node of an allocated card, and the host
		// holds exactly that device at its path and its link.
		owner := map[string]drm.DeviceNode{}
		for _, c := range dec.cards {
			require.NotEmpty(t, w.store[c], "card %s has no nodes, yet it passed", c)
			require.False(t, marked[c], "card %s is marked unavailable, yet it passed", c)
			for _, n := range w.store[c] {
				owner[n.Path] = n
			}
		}
		require.Len(t, adj.GetLinux().GetDevices(), len(added))
		for _, d := range adj.GetLinux().GetDevices() {
			n, ok := owner[d.GetPath()]
			require.True(t, ok, "injected %s, which no allocated card has", d.GetPath())
			require.Equal(t, int64(n.Major), d.GetMajor())
			require.Equal(t, int64(n.Minor), d.GetMinor())
			h, err := w.stat(hostPathOf(n))
			require.NoError(t, err)
			require.Equal(t, HostDevice{Char: true, Major: n.Major, Minor: n.Minor}, h, "injected %s does not match the host", d.GetPath())
		}
	})
}
