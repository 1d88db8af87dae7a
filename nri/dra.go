package nri

import (
	"context"
	"sort"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
)

// allocation asks the kubelet what it allocated to the container: the
// device-plugin device IDs by resource, and the devices of its DRA
// claims.
func (p *Plugin) allocation(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (map[string][]string, []podresources.ClaimDevice, error) {
	a, err := p.auth.ContainerAllocation(ctx, pod.GetNamespace(), pod.GetName(), ctr.GetName())
	if err != nil {
		return nil, nil, err
	}
	return a.Devices, a.Claims, nil
}

// claimedCards returns the cards named by the CDI devices of our kind in
// the container's DRA claims of our driver (config.DRADriver). A claim
// device of another driver, a CDI name of another kind, the reserved
// "all" and a malformed card ID authorize nothing: the kubelet reports
// what a driver's prepare returned, and only our driver's answer speaks
// for our cards.
func claimedCards(claims []podresources.ClaimDevice, kind string) map[string]bool {
	var cards map[string]bool
	prefix := kind + "="
	for _, d := range claims {
		if d.Driver != config.DRADriver {
			continue
		}
		for _, name := range d.CDIDevices {
			card, ok := strings.CutPrefix(name, prefix)
			// ValidCardID also refuses the reserved "all".
			if !ok || alloc.ValidCardID(card) != nil {
				continue
			}
			if cards == nil {
				cards = map[string]bool{}
			}
			cards[card] = true
		}
	}
	return cards
}

// authorizeWithClaims is authorize for a container that DRA claims may
// also have given cards (claimed, from claimedCards): a CDI card of our
// kind that a claim covers is granted; everything else is decided by
// authorize against the device-plugin allocation.
func authorizeWithClaims(req request, allocated map[string][]string, claimed map[string]bool, served ResourceFilter) (decision, error) {
	req, granted := grantClaimed(req, claimed)
	dec, err := authorize(req, allocated, served)
	if err != nil {
		return decision{}, err
	}
	return withClaimed(dec, granted), nil
}

// grantClaimed splits off the CDI cards of the request that the
// container's DRA claims cover: they are authorized by the claim. The
// rest of the request goes through authorize, where a CDI card that
// neither a claim nor a device plugin allocated fails the container.
func grantClaimed(req request, claimed map[string]bool) (request, []string) {
	if len(claimed) == 0 || len(req.cdiCards) == 0 {
		return req, nil
	}
	var granted, rest []string
	for _, c := range req.cdiCards {
		if claimed[c] {
			granted = append(granted, c)
		} else {
			rest = append(rest, c)
		}
	}
	req.cdiCards = rest
	return req, granted
}

// withClaimed adds the cards granted by DRA claims to a decision, keeping
// its cards sorted and unique.
func withClaimed(dec decision, granted []string) decision {
	if len(granted) == 0 {
		return dec
	}
	cards := append(append([]string(nil), dec.cards...), granted...)
	sort.Strings(cards)
	dec.cards = compact(cards)
	return dec
}
