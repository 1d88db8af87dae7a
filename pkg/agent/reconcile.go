package agent

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/metrics"
)

// Discoverer finds the node's cards.
type Discoverer interface {
	Discover() (*drm.Inventory, error)
}

// DiscoverFunc lets a function be a Discoverer.
type DiscoverFunc func() (*drm.Inventory, error)

// Discover calls f.
func (f DiscoverFunc) Discover() (*drm.Inventory, error) { return f() }

// SpecWriter keeps the CDI spec files equal to a set of cards.
type SpecWriter interface {
	Sync(cards []drm.Card) (changed bool, err error)
}

// Publisher advertises pools to the kubelet.
type Publisher interface {
	Update(pools []config.Pool, unhealthy map[string]bool) error
}

// known is a card the agent tracks, with its last discovered data.
type known struct {
	card    drm.Card
	healthy bool
}

// Reconciler turns one discovery pass into spec files and device lists,
// in an order that keeps every advertised device resolvable:
//
//  1. specs for every card advertised before or after (new cards get
//     their spec before they are listed);
//  2. the device lists;
//  3. specs without the cards that left the lists (removed cards leave
//     the lists before their spec goes).
//
// A card that discovery no longer reports but whose sysfs device still
// exists (its driver unbound, or its nodes are gone) stays listed as
// Unhealthy with a spec that holds no device node (cdi.Unavailable), so
// CDI names the kubelet checkpointed keep resolving but never to numbers
// another card may own now; it turns Healthy, with its spec rewritten
// from its current nodes, when discovery reports it again. A card whose
// sysfs device is gone is removed.
//
// Reconciler is not safe for concurrent use; the agent calls it from one
// goroutine.
type Reconciler struct {
	cfg     *config.Config
	disc    Discoverer
	specs   SpecWriter
	pub     Publisher
	log     *logrus.Entry
	metrics *metrics.Agent
	// exists reports whether a sysfs path is still there.
	exists func(path string) bool

	known      map[string]known
	advertised map[string]bool
	// pinned maps cards seeded from the backend's record of cards in
	// use to the resource they were handed out from (see SeedUnbound).
	pinned  map[string]string
	skipped string
	// companions is the last pass's companion errors, joined.
	companions string

	// specWarning is the last pass's spec error, for /readyz.
	specMu      sync.Mutex
	specWarning string
}

// NewReconciler builds a Reconciler; met may be nil.
func NewReconciler(cfg *config.Config, disc Discoverer, specs SpecWriter, pub Publisher, log *logrus.Entry, met *metrics.Agent) *Reconciler {
	return &Reconciler{
		cfg: cfg, disc: disc, specs: specs, pub: pub, log: log, metrics: met,
		exists: func(p string) bool {
			_, err := os.Lstat(p)
			return err == nil
		},
		known:      map[string]known{},
		advertised: map[string]bool{},
		pinned:     map[string]string{},
	}
}

// Reconcile runs one pass; trigger names its cause for metrics and logs.
// On a discovery error nothing changes. On a spec error, cards whose spec
// may be missing are not advertised (cards already advertised stay, with
// their health), and the error is returned so the caller retries.
func (r *Reconciler) Reconcile(trigger string) error {
	inv, err := r.discover(trigger)
	if err != nil {
		return err
	}
	next := r.track(inv.Cards)
	pools, unhealthy := r.assign(next)
	nextAdv := advertisedIn(pools)

	// 1. Specs for the union: new cards appear, nothing goes yet.
	union := r.union(next, unhealthy, nextAdv)
	specErr := r.syncSpecs(union)
	if specErr != nil {
		specErr = fmt.Errorf("write CDI specs: %w", specErr)
		pools = keepOnly(pools, r.advertised)
		nextAdv = advertisedIn(pools)
		// A card whose spec could not be written has no spec, or one
		// that may name another card's numbers: listed Unhealthy, so no
		// new container gets it, until a pass writes it.
		var se *cdi.SyncError
		if errors.As(specErr, &se) {
			for _, id := range se.Stale {
				if nextAdv[id] {
					unhealthy[id] = true
				}
			}
		}
	}
	r.setSpecWarning(specErr)

	// 2. Device lists.
	r.publish(pools, unhealthy)
	dropped := len(union) > len(nextAdv)
	r.known, r.advertised = next, nextAdv
	if specErr != nil {
		return specErr
	}

	// 3. Specs without the cards that left the lists.
	if dropped {
		if err := r.syncSpecs(onlyIn(union, nextAdv)); err != nil {
			err = fmt.Errorf("remove CDI specs of removed cards: %w", err)
			r.setSpecWarning(err)
			return err
		}
	}
	return nil
}

// discover runs discovery, counts it and logs what it skipped.
func (r *Reconciler) discover(trigger string) (*drm.Inventory, error) {
	inv, err := r.disc.Discover()
	if err != nil {
		r.metrics.Error("discovery")
		return nil, fmt.Errorf("discover cards: %w", err)
	}
	r.metrics.Discovery(trigger, len(inv.Skipped))
	r.log.WithFields(logrus.Fields{"trigger": trigger, "cards": len(inv.Cards), "skipped": len(inv.Skipped)}).Debug("discovery pass")
	r.logSkipped(inv.Skipped)
	r.logCompanions(inv.Companions)
	return inv, nil
}

// track returns the cards to know after a pass that discovered cards:
// those, healthy, and the known cards discovery no longer reports whose
// sysfs device is still there, unhealthy. It logs every change of state.
func (r *Reconciler) track(cards []drm.Card) map[string]known {
	next := make(map[string]known, len(cards))
	for _, c := range cards {
		next[c.ID] = known{card: c, healthy: true}
		old, ok := r.known[c.ID]
		switch {
		case !ok:
			r.log.WithFields(cardFields(&c)).Info("card found")
		case !old.healthy:
			r.log.WithFields(cardFields(&c)).Info("card healthy again")
		}
	}
	for id, k := range r.known {
		if _, ok := next[id]; ok {
			continue
		}
		if k.card.SysfsPath != "" && r.exists(k.card.SysfsPath) {
			if k.healthy {
				r.log.WithFields(cardFields(&k.card)).Warn("card unhealthy: its driver unbound or its nodes are gone")
			}
			next[id] = known{card: k.card, healthy: false}
			continue
		}
		r.log.WithFields(cardFields(&k.card)).Info("card removed")
	}
	return next
}

// assign puts the cards into pools, by ID order, with the pinned cards
// in the pools they were allocated from, and returns the unhealthy ones.
func (r *Reconciler) assign(next map[string]known) (pools []config.Pool, unhealthy map[string]bool) {
	cards := make([]drm.Card, 0, len(next))
	unhealthy = map[string]bool{}
	for id, k := range next {
		cards = append(cards, k.card)
		if !k.healthy {
			unhealthy[id] = true
		}
	}
	slices.SortFunc(cards, byID)
	return r.addPinned(r.cfg.Assign(cards), next), unhealthy
}

// union returns, sorted by ID, the spec form of every card advertised
// after this pass (nextAdv) or before it. An Unhealthy card's spec holds
// no device node: its old numbers may already be another card's (DRM
// minors are handed out lowest-free).
func (r *Reconciler) union(next map[string]known, unhealthy, nextAdv map[string]bool) []drm.Card {
	union := make([]drm.Card, 0, len(next))
	for id, k := range next {
		if nextAdv[id] {
			union = append(union, specCard(k.card, !unhealthy[id]))
		}
	}
	for id := range r.advertised {
		if !nextAdv[id] {
			if k, ok := r.known[id]; ok {
				union = append(union, specCard(k.card, k.healthy))
			}
		}
	}
	slices.SortFunc(union, byID)
	return union
}

// syncSpecs makes the spec files those of cards, and counts the result.
func (r *Reconciler) syncSpecs(cards []drm.Card) error {
	changed, err := r.specs.Sync(cards)
	r.metrics.SpecSync(changed, err)
	if err != nil {
		r.metrics.Error("specs")
	}
	return err
}

// publish hands the device lists to the kubelet side. A resource that
// cannot be served yet is retried by the publisher itself.
func (r *Reconciler) publish(pools []config.Pool, unhealthy map[string]bool) {
	if err := r.pub.Update(pools, unhealthy); err != nil {
		r.metrics.Error("server")
		r.log.WithError(err).Warn("cannot serve every resource yet; retrying")
	}
}

// setSpecWarning keeps err, the pass's spec error, for SpecWarnings, and
// logs when the specs can be written again.
func (r *Reconciler) setSpecWarning(err error) {
	w := ""
	if err != nil {
		w = err.Error() + ": cards whose spec could not be written are listed Unhealthy until it is"
	}
	r.specMu.Lock()
	was := r.specWarning
	r.specWarning = w
	r.specMu.Unlock()
	if was != "" && w == "" {
		r.log.Info("CDI specs can be written again")
	}
}

// SpecWarnings returns the last pass's spec error, if any, as a /readyz
// warning: the agent stays up and serves what has a valid spec while the
// spec directory is full or read-only.
func (r *Reconciler) SpecWarnings() []string {
	r.specMu.Lock()
	defer r.specMu.Unlock()
	if r.specWarning == "" {
		return nil
	}
	return []string{r.specWarning}
}

// onlyIn returns the cards whose IDs are in ids, in order.
func onlyIn(cards []drm.Card, ids map[string]bool) []drm.Card {
	out := make([]drm.Card, 0, len(ids))
	for _, c := range cards {
		if ids[c.ID] {
			out = append(out, c)
		}
	}
	return out
}

func byID(a, b drm.Card) int { return strings.Compare(a.ID, b.ID) }

// Unhealthy returns the IDs of the cards listed as Unhealthy, sorted.
func (r *Reconciler) Unhealthy() []string {
	var out []string
	for id, k := range r.known {
		if !k.healthy && r.advertised[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Advertised returns the IDs of the cards in the device lists, sorted.
func (r *Reconciler) Advertised() []string {
	return slices.Sorted(maps.Keys(r.advertised))
}

// specCard is the form of a card its spec is generated from: the card
// itself while it is healthy, else the card without nodes.
func specCard(c drm.Card, healthy bool) drm.Card {
	if healthy {
		return c
	}
	return cdi.Unavailable(c)
}

func advertisedIn(pools []config.Pool) map[string]bool {
	out := map[string]bool{}
	for _, p := range pools {
		for _, c := range p.Cards {
			out[c.ID] = true
		}
	}
	return out
}

// keepOnly removes from pools every card not in ids.
func keepOnly(pools []config.Pool, ids map[string]bool) []config.Pool {
	out := make([]config.Pool, len(pools))
	for i, p := range pools {
		out[i] = p
		out[i].Cards = nil
		for _, c := range p.Cards {
			if ids[c.ID] {
				out[i].Cards = append(out[i].Cards, c)
			}
		}
	}
	return out
}

func cardFields(c *drm.Card) logrus.Fields {
	return logrus.Fields{"card": c.ID, "name": c.Name, "driver": c.Driver}
}

// logSkipped warns about malformed entries when the set changes, so a
// permanent problem is not repeated on every resync.
func (r *Reconciler) logSkipped(skipped []error) {
	r.logChanged(&r.skipped, skipped, "DRM entry skipped", "no DRM entries skipped any more")
}

// logCompanions logs the refused and missing companion nodes when they
// differ from the last pass's: the cards are advertised without them,
// and a container that needs them would fail in ways that name no cause.
func (r *Reconciler) logCompanions(errs []error) {
	r.logChanged(&r.companions, errs, "companion node not given", "every companion node found")
}

// logChanged warns once per error when errs differ from the last set,
// kept joined in *last, and says clear when they are gone.
func (r *Reconciler) logChanged(last *string, errs []error, warn, clear string) {
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	joined := strings.Join(msgs, "\n")
	if joined == *last {
		return
	}
	*last = joined
	for _, e := range errs {
		r.log.WithError(e).Warn(warn)
	}
	if len(errs) == 0 {
		r.log.Info(clear)
	}
}
