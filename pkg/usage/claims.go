package usage

import (
	"context"
	"time"
)

// Claim is a DRA ResourceClaim through which a container holds a card:
// whose claim the container's use of the card is, and what the claim was
// promised of it.
type Claim struct {
	// Card is the card's stable ID, as in CardUsage.ID.
	Card string `json:"card"`
	// Namespace and Name name the ResourceClaim.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ShareID is the scheduler's ID of the allocation of a share of a
	// shared card; empty for a card the claim holds whole.
	ShareID string `json:"shareID,omitempty"`
	// Shares is how many of the card's shares the claim consumed, of
	// CardShares; both 0 for a card held whole. CardShares is 0 too when
	// the card is no longer published with shares (its pool changed).
	Shares     int64 `json:"shares,omitempty"`
	CardShares int64 `json:"cardShares,omitempty"`
	// Admin is set for an allocation with admin access (a monitoring
	// claim), which is promised none of the card.
	Admin bool `json:"admin,omitempty"`
	// Memory is the device memory in bytes the share consumed of the
	// card's (its memory capacity, where the card publishes one); 0
	// otherwise.
	Memory int64 `json:"memory,omitempty"`
}

// Promised is the part of the card's engine time the claim was promised,
// 0 to 1: its shares over the card's, all of it for a card held whole,
// none for admin access. ok is false for a share whose card's shares are
// not known.
func (c Claim) Promised() (ratio float64, ok bool) {
	switch {
	case c.Admin:
		return 0, true
	case c.ShareID == "":
		return 1, true
	case c.CardShares > 0:
		return float64(c.Shares) / float64(c.CardShares), true
	}
	return 0, false
}

// ClaimSource tells which DRA claims the containers of the node hold
// cards through (dri-cdi-dra: the kubelet's PodResources with its own
// checkpoint of prepared claims). It is asked once per scan, never on a
// request path.
type ClaimSource interface {
	// ContainerClaims returns the claims of every container that holds
	// a card through one, by container names.
	ContainerClaims(ctx context.Context) (map[Names][]Claim, error)
}

// claimTimeout bounds one ContainerClaims call of a scan.
const claimTimeout = 5 * time.Second

// claimsOf asks the claim source, once per scan. A failed call keeps the
// last answer, so a kubelet that is restarting does not make the claim
// series come and go; it is logged when it starts failing and when it
// recovers, not at every scan. Callers hold m.mu.
func (m *Monitor) claimsOf() map[Names][]Claim {
	if m.claimSource == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	claims, err := m.claimSource.ContainerClaims(ctx)
	switch {
	case err != nil && !m.claimsFailing:
		m.claimsFailing = true
		m.log.WithError(err).Warn("usage: cannot read which claims the containers hold; their rows keep the last claims read")
	case err == nil && m.claimsFailing:
		m.claimsFailing = false
		m.log.Info("usage: reading the containers' claims again")
	}
	if err == nil {
		m.claims = claims
	}
	return m.claims
}

// claimsOfCard is the claims of one card among a container's.
func claimsOfCard(claims []Claim, card string) []Claim {
	var out []Claim
	for _, c := range claims {
		if c.Card == card {
			out = append(out, c)
		}
	}
	return out
}
