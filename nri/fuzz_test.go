package nri

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
)

const (
	fzKind  = "dri-cdi.dev/gpu"
	fzI915  = "dri-cdi.dev/i915"
	fzXe    = "gpu.intel.com/xe"
	fzOther = "example.com/other" // allocated by another plugin, not served
)

// fzServed serves two resources; fzOther is some other device plugin's.
type fzServed struct{}

func (fzServed) ServesResource(name string) bool { return name == fzI915 || name == fzXe }

// fzKubelet answers with whatever the fuzzed input says the kubelet
// allocated to the container (device-plugin IDs and DRA claim devices),
// or with one of the errors the real client returns.
type fzKubelet struct {
	allocated map[string][]string
	claims    []podresources.ClaimDevice
	err       error
}

func (k *fzKubelet) ContainerAllocation(context.Context, string, string, string) (podresources.Allocation, error) {
	if k.err != nil {
		return podresources.Allocation{}, k.err
	}
	return podresources.Allocation{Devices: k.allocated, Claims: k.claims}, nil
}

// fzClaims reads the DRA claim devices the kubelet reports from fuzzed
// text: one device per line, "<driver> <CDI name>,<CDI name>...". Any
// text is some answer: other drivers, other kinds, "all", bad IDs.
func fzClaims(s string) []podresources.ClaimDevice {
	var out []podresources.ClaimDevice
	for line := range strings.SplitSeq(s, "\n") {
		driver, names, _ := strings.Cut(line, " ")
		out = append(out, podresources.ClaimDevice{Claim: "c", Namespace: "ns", Driver: driver, CDIDevices: strings.Split(names, ",")})
	}
	return out
}

// fzSource knows every valid card: one node per card, at a path that
// names it, so an injected device tells which card it came from.
type fzSource struct{}

const fzNodePrefix = "/dev/dri/fz-"

func (fzSource) Nodes(cardID string) ([]drm.DeviceNode, bool) {
	if alloc.ValidCardID(cardID) != nil {
		return nil, false
	}
	p := fzNodePrefix + cardID
	return []drm.DeviceNode{{Path: p, HostPath: p, Major: 226, Minor: 1, Mode: 0o660}}, true
}

// fzAllocation reads the kubelet's answer from fuzzed text: one resource
// per line, "<resource>=<id>,<id>...". Any text is some answer, including
// IDs that are not ours, empty IDs and the reserved "all".
func fzAllocation(s string) map[string][]string {
	out := map[string][]string{}
	for line := range strings.SplitSeq(s, "\n") {
		res, ids, _ := strings.Cut(line, "=")
		out[res] = append(out[res], strings.Split(ids, ",")...)
	}
	return out
}

// FuzzAuthorize checks the NRI authorization decision for arbitrary
// annotations, CDI device names and kubelet answers (device plugins and
// DRA claims): the cards given to a container are always cards of device
// IDs the kubelet allocated to it for a served resource, or of CDI devices
// of our kind in its claims of our DRA driver, and that it asked for;
// "all" is never given; a CDI device of our kind for any other card fails
// the container; a failed or unconfirmed container gets nothing.
func FuzzAuthorize(f *testing.F) {
	ka, va := alloc.Annotation(fzI915, []string{"0000:00:02.0"})
	kx, vx := alloc.Annotation(fzXe, []string{"0000:03:00.0::0", "0000:03:00.0::1"})
	ko, vo := alloc.Annotation(fzOther, []string{"0000:04:00.0"})
	// granted
	f.Add(ka, va, "", "", fzKind+"=0000:00:02.0", fzI915+"=0000:00:02.0", "", uint8(0))
	// forged second card; replicas of one card
	f.Add(ka, fzI915+"=0000:00:02.0,0000:03:00.0", kx, vx, "", fzI915+"=0000:00:02.0\n"+fzXe+"=0000:03:00.0::1", "", uint8(0))
	// the card is allocated, but under a resource we do not serve
	f.Add(ko, vo, "", "", fzKind+"=0000:04:00.0", fzOther+"=0000:04:00.0", "", uint8(0))
	// the reserved name, from the runtime and from the kubelet
	f.Add(ka, va, "", "", fzKind+"=all\n"+fzKind+"=0000:00:02.0", fzI915+"=all,0000:00:02.0", "", uint8(0))
	// CDI device of our kind the kubelet did not allocate
	f.Add("", "", "", "", fzKind+"=0000:00:02.0\nother.dev/x=y", fzXe+"=0000:03:00.0::3", "", uint8(0))
	// pod unknown to the kubelet; kubelet unreachable
	f.Add(ka, va, "", "", "", "", "", uint8(1))
	f.Add(ka, va, "", "", fzKind+"=0000:00:02.0", fzI915+"=0000:00:02.0", "", uint8(2))
	// DRA: a claim of our driver covers the CDI card; one of another
	// driver, another kind, "all" and a bad ID do not
	f.Add("", "", "", "", fzKind+"=0000:00:02.0", "", config.DRADriver+" "+fzKind+"=0000:00:02.0", uint8(0))
	f.Add("", "", "", "", fzKind+"=0000:00:02.0", "", "gpu.example.com "+fzKind+"=0000:00:02.0", uint8(0))
	f.Add("", "", "", "", fzKind+"=0000:00:02.0", "", config.DRADriver+" other.dev/x=0000:00:02.0,"+fzKind+"=../x", uint8(0))
	f.Add("", "", "", "", fzKind+"=all", "", config.DRADriver+" "+fzKind+"=all", uint8(0))
	// DRA and device plugin together; a claim for a pod the kubelet does not know
	f.Add(ka, va, "", "", fzKind+"=0000:00:02.0\n"+fzKind+"=0000:03:00.0", fzI915+"=0000:00:02.0", config.DRADriver+" "+fzKind+"=0000:03:00.0", uint8(0))
	f.Add("", "", "", "", fzKind+"=0000:03:00.0", "", config.DRADriver+" "+fzKind+"=0000:03:00.0", uint8(1))
	// malformed annotation and CDI name
	f.Add(alloc.AnnotationPrefix+"x", "x=../../a", "", "", fzKind+"=../b", "", "", uint8(0))

	log := logrus.New()
	log.SetOutput(io.Discard)
	log.SetLevel(logrus.PanicLevel)
	kubelet := &fzKubelet{}
	plugin, err := New(Config{Kind: fzKind, Resources: fzServed{}, Authorizer: kubelet, Devices: fzSource{}, Log: logrus.NewEntry(log)})
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, cdiNames, allocation, claimText string, answer uint8) {
		ctr := &api.Container{Name: "app", Annotations: map[string]string{k1: v1, k2: v2}}
		for name := range strings.SplitSeq(cdiNames, "\n") {
			if name != "" {
				ctr.CDIDevices = append(ctr.CDIDevices, &api.CDIDevice{Name: name})
			}
		}
		// allocated is what the kubelet confirms: nothing when it does
		// not know the pod or cannot be asked.
		allocated, claims := fzAllocation(allocation), fzClaims(claimText)
		unreachable := false
		switch answer % 3 {
		case 0:
			*kubelet = fzKubelet{allocated: allocated, claims: claims}
		case 1:
			*kubelet = fzKubelet{err: podresources.ErrPodNotFound}
			allocated, claims = nil, nil
		case 2:
			*kubelet = fzKubelet{allocated: allocated, claims: claims, err: errors.New("kubelet unreachable")}
			allocated, claims, unreachable = nil, nil, true
		}

		// The cards the kubelet allocated for served resources, by the
		// device ID format's owner, and the cards the container asked for.
		allowed := map[string]bool{}
		for res, ids := range allocated {
			if !(fzServed{}).ServesResource(res) {
				continue
			}
			for _, id := range ids {
				if card, _, err := alloc.ParseDeviceID(id); err == nil {
					allowed[card] = true
				}
			}
		}
		// DRA: the CDI devices of our kind in claims of our driver, each
		// checked here by the card ID format's owner.
		for _, d := range claims {
			if d.Driver != config.DRADriver {
				continue
			}
			for _, name := range d.CDIDevices {
				if card, ok := strings.CutPrefix(name, fzKind+"="); ok && alloc.ValidCardID(card) == nil {
					allowed[card] = true
				}
			}
		}
		asked := map[string]bool{}
		for _, d := range ctr.CDIDevices {
			if card, ok := strings.CutPrefix(d.Name, fzKind+"="); ok {
				asked[card] = true
			}
		}
		if reqs, err := alloc.Parse(ctr.Annotations); err == nil {
			for _, r := range reqs {
				for _, id := range r.DeviceIDs {
					asked[alloc.CardID(id)] = true
				}
			}
		}

		req, err := parseRequest(ctr, fzKind, fzServed{})
		if err != nil {
			require.ErrorIs(t, err, ErrBadRequest)
		} else {
			dec, err := authorizeWithClaims(req, allocated, claimedCards(claims, fzKind), fzServed{})
			if err != nil {
				require.ErrorIs(t, err, ErrNotAllocated)
				require.Empty(t, dec.cards, "a refused container gets nothing")
				// Only a CDI device of our kind outside the allocation
				// refuses the container.
				require.True(t, slices.ContainsFunc(req.cdiCards, func(c string) bool { return !allowed[c] }),
					"refused though every CDI card %v is allocated (%v)", req.cdiCards, allocated)
			} else {
				for _, c := range req.cdiCards {
					require.True(t, allowed[c], "CDI card %q of our kind passed without an allocation", c)
				}
			}
			require.True(t, slices.IsSorted(dec.cards))
			require.Equal(t, len(dec.cards), len(slices.Compact(slices.Clone(dec.cards))), "duplicate cards %v", dec.cards)
			for _, c := range dec.cards {
				require.NotEqual(t, cdi.AllDevice, c)
				require.NoError(t, alloc.ValidCardID(c))
				require.True(t, allowed[c], "card %q given but not allocated (%v)", c, allocated)
				require.True(t, asked[c], "card %q given but not asked for", c)
			}
		}

		// The same through the CreateContainer handler: what it injects
		// is a subset of the same cards.
		adj, _, err := plugin.CreateContainer(context.Background(), &api.PodSandbox{Name: "pod", Namespace: "ns"}, ctr)
		if err != nil {
			require.Nil(t, adj)
			return
		}
		if unreachable && !req.empty() {
			t.Fatalf("container asking for %+v created although the kubelet could not confirm it", req)
		}
		for _, d := range adj.GetLinux().GetDevices() {
			card, ok := strings.CutPrefix(d.GetPath(), fzNodePrefix)
			require.True(t, ok, "injected %s, not a node of our source", d.GetPath())
			require.NotEqual(t, cdi.AllDevice, card)
			require.True(t, allowed[card], "injected card %q, not allocated (%v)", card, allocated)
			require.True(t, asked[card], "injected card %q, not asked for", card)
		}
	})
}
