package dra

import (
	"context"
	"errors"

	"github.com/dri-cdi/dri-cdi/pkg/usage"
)

// The usage scans (--usage) attribute each container's use of a card to
// the claims it holds the card through. Which container holds which
// claim only the kubelet knows: its PodResources List names, per
// container, each claim's devices and share IDs (KEP-3695). What a share
// was promised only this plugin knows: its checkpoint records the shares
// each allocation consumed, and the inventory the card's shares. The
// join is by claim and device, off every request path, once per scan.

var _ usage.ClaimSource = (*Driver)(nil)

// errNoPodResources is ContainerClaims without a PodResources client.
var errNoPodResources = errors.New("no kubelet PodResources socket to read the containers' claims from (--pod-resources-socket)")

// ContainerClaims returns, for every container the kubelet reports with
// a claim of this driver's devices on this node that the checkpoint
// records as prepared, the claims through which it holds its cards, with
// the shares (and device memory) each consumed of the card's
// (usage.ClaimSource). A
// claim the checkpoint does not record (being prepared, or unprepared
// already) is left out until it is.
func (d *Driver) ContainerClaims(ctx context.Context) (map[usage.Names][]usage.Claim, error) {
	if d.opts.PodResources == nil {
		return nil, errNoPodResources
	}
	list, err := d.opts.PodResources.NodeClaims(ctx)
	if err != nil {
		return nil, err
	}
	prepared, err := d.claims.claims()
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	inv := d.inv
	d.mu.Unlock()
	type key struct{ namespace, name, device, share string }
	recorded := map[key]PreparedDevice{}
	for _, pc := range prepared {
		for _, dev := range pc.Devices {
			recorded[key{pc.Namespace, pc.Name, dev.Device, dev.ShareID}] = dev
		}
	}
	out := map[usage.Names][]usage.Claim{}
	for _, cc := range list {
		names := usage.Names{Namespace: cc.Namespace, Pod: cc.Pod, Container: cc.Container}
		for _, cd := range cc.Claims {
			if cd.Driver != DriverName || cd.Pool != d.opts.NodeName {
				continue
			}
			dev, ok := recorded[key{cd.Namespace, cd.Claim, cd.Device, cd.ShareID}]
			if !ok {
				continue
			}
			c := usage.Claim{Card: dev.Card, Namespace: cd.Namespace, Name: cd.Claim, ShareID: dev.ShareID,
				Shares: dev.Shares, Admin: dev.AdminAccess, Memory: dev.Memory}
			if now, ok := inv.ByName[dev.Device]; ok && dev.ShareID != "" && now.Card == dev.Card {
				c.CardShares = int64(now.Shares)
			}
			if !containsClaim(out[names], c) {
				out[names] = append(out[names], c)
			}
		}
	}
	return out, nil
}

// containsClaim reports whether claims has c's allocation (the kubelet
// lists a device once per request of the container that names it).
func containsClaim(claims []usage.Claim, c usage.Claim) bool {
	for _, o := range claims {
		if o.Card == c.Card && o.Namespace == c.Namespace && o.Name == c.Name && o.ShareID == c.ShareID {
			return true
		}
	}
	return false
}
