package nri

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
)

var (
	// ErrBadRequest is wrapped when a container's allocation annotation or
	// one of its CDI device names of our kind is malformed.
	ErrBadRequest = errors.New("malformed dri-cdi device request")
	// ErrNotAllocated is wrapped when the runtime resolved a CDI device of
	// our kind that the kubelet did not allocate to the container.
	ErrNotAllocated = errors.New("CDI device not allocated by the kubelet")
	// ErrUnconfirmed is wrapped when the kubelet could not be asked what
	// the container was allocated.
	ErrUnconfirmed = errors.New("cannot confirm the allocation with the kubelet")
	// ErrUnknownCard is wrapped when an allocated card is not described by
	// any of our CDI specs.
	ErrUnknownCard = errors.New("card not described by the CDI specs")
	// ErrDeviceConflict is wrapped when the container already has a device
	// at one of the card's paths, with other device numbers.
	ErrDeviceConflict = errors.New("device path already used by another device")
)

// ResourceFilter says which extended resources dri-cdi serves.
// *config.Config satisfies it.
type ResourceFilter interface {
	ServesResource(name string) bool
}

// request is what one container asks dri-cdi for.
type request struct {
	// annotated are the allocation annotations of resources we serve.
	annotated []alloc.Request
	// cdiCards are the card IDs (or "all") of the CDI devices of our kind
	// the runtime resolved for the container (from Container.CDIDevices
	// and cdi.k8s.io/* annotations), sorted, without duplicates.
	cdiCards []string
}

func (r *request) empty() bool { return len(r.annotated) == 0 && len(r.cdiCards) == 0 }

// parseRequest extracts what a container asks for. kind is our CDI kind.
// Annotations of resources served does not cover are dropped. The common case,
// a container asking for nothing, allocates nothing.
func parseRequest(c *api.Container, kind string, served ResourceFilter) (request, error) {
	var req request
	asked, err := alloc.Parse(c.GetAnnotations())
	if err != nil {
		return request{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	for _, a := range asked {
		if served.ServesResource(a.Resource) {
			req.annotated = append(req.annotated, a)
		}
	}
	prefix := kind + "="
	for _, qualified := range requestedCDINames(c) {
		name, ok := strings.CutPrefix(qualified, prefix)
		if !ok {
			continue
		}
		if name != cdi.AllDevice {
			if err := alloc.ValidCardID(name); err != nil {
				return request{}, fmt.Errorf("%w: CDI device %q: %w", ErrBadRequest, alloc.Truncate(qualified), err)
			}
		}
		req.cdiCards = append(req.cdiCards, name)
	}
	if len(req.cdiCards) > 1 {
		sort.Strings(req.cdiCards)
		req.cdiCards = compact(req.cdiCards)
	}
	return req, nil
}

// compact removes adjacent duplicates from a sorted slice.
func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// decision is the outcome of authorizing a request.
type decision struct {
	// cards are the card IDs to give the container, sorted.
	cards []string
	// denied are the annotated "<resource>=<device ID>" the kubelet did not
	// allocate to the container, sorted.
	denied []string
}

// authorize checks a request against what the kubelet reports as
// allocated to the container (resource name → device IDs). Only device
// IDs of resources served covers count. A CDI device of our kind for a
// card outside that allocation is an error wrapping ErrNotAllocated;
// annotated device IDs outside it are denied.
func authorize(req request, allocated map[string][]string, served ResourceFilter) (decision, error) {
	allowed := map[string]map[string]bool{}
	allowedCards := map[string]bool{}
	for res, ids := range allocated {
		if !served.ServesResource(res) {
			continue
		}
		for _, id := range ids {
			card := alloc.CardID(id)
			if card == "" || card == cdi.AllDevice {
				continue
			}
			if allowed[res] == nil {
				allowed[res] = map[string]bool{}
			}
			allowed[res][id] = true
			allowedCards[card] = true
		}
	}

	var notAllocated []string
	cards := map[string]bool{}
	for _, card := range req.cdiCards {
		if !allowedCards[card] {
			notAllocated = append(notAllocated, card)
			continue
		}
		cards[card] = true
	}
	if len(notAllocated) > 0 {
		return decision{}, fmt.Errorf("%w: the runtime added CDI device(s) %s of our kind, but the kubelet allocated no such card to this container",
			ErrNotAllocated, strings.Join(notAllocated, ", "))
	}

	var dec decision
	for _, a := range req.annotated {
		for _, id := range a.DeviceIDs {
			if !allowed[a.Resource][id] {
				dec.denied = append(dec.denied, a.Resource+"="+id)
				continue
			}
			cards[alloc.CardID(id)] = true
		}
	}
	for c := range cards {
		dec.cards = append(dec.cards, c)
	}
	sort.Strings(dec.cards)
	sort.Strings(dec.denied)
	return dec, nil
}
