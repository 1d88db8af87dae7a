package dra

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// Defaults of the collection of orphaned checkpoint entries.
const (
	// orphanInterval is how often the prepared claims are checked
	// against the API server.
	orphanInterval = 5 * time.Minute
	// orphanGrace is how long a claim must have been seen gone before
	// its entry is removed: the kubelet unprepares a deleted pod's claims
	// by itself, and usually first.
	orphanGrace = 10 * time.Minute
)

// orphans collects the checkpoint entries of claims that no longer
// exist: a claim whose unprepare never reached the plugin (the kubelet
// lost its state, the node restarted while the plugin was down) would
// keep its cards refused to every other claim forever. An entry goes
// only after a GET of its claim returned NotFound, or a claim of that
// name with another UID, in every check over orphanGrace; an error of any
// other kind removes nothing.
type orphans struct {
	interval, grace time.Duration
	// goneSince is when each claim UID was first seen gone.
	goneSince map[string]time.Time
	now       func() time.Time
}

func newOrphans() *orphans {
	return &orphans{interval: orphanInterval, grace: orphanGrace, goneSince: map[string]time.Time{}, now: time.Now}
}

// collectOrphans checks every interval until ctx ends.
func (d *Driver) collectOrphans(ctx context.Context, o *orphans) {
	t := time.NewTicker(o.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.collectOnce(ctx, o)
		}
	}
}

// collectOnce checks each prepared claim once and removes the entries of
// those gone for longer than the grace period.
func (d *Driver) collectOnce(ctx context.Context, o *orphans) {
	claims, err := d.claims.claims()
	if err != nil {
		d.log.WithError(err).Warn("cannot read the prepared claims to collect orphans")
		return
	}
	now := o.now()
	var expired []string
	for uid, pc := range claims {
		gone, err := d.claimGone(ctx, uid, pc)
		if err != nil {
			d.log.WithError(err).WithField("claim", pc.Namespace+"/"+pc.Name).Debug("cannot tell whether a prepared claim still exists")
			continue // never on an error: the entry stays as it was
		}
		if !gone {
			delete(o.goneSince, uid)
			continue
		}
		since, ok := o.goneSince[uid]
		if !ok {
			o.goneSince[uid] = now
			continue
		}
		if now.Sub(since) >= o.grace {
			expired = append(expired, uid)
		}
	}
	for uid := range o.goneSince {
		if _, ok := claims[uid]; !ok {
			delete(o.goneSince, uid)
		}
	}
	if len(expired) == 0 {
		return
	}
	var removed []PreparedClaim
	n, err := d.claims.update(func(prepared *claimSet) {
		for _, uid := range expired {
			if pc, ok := prepared.remove(uid); ok {
				removed = append(removed, pc)
			}
		}
	})
	if err != nil {
		d.log.WithError(err).Warn("cannot remove the checkpoint entries of claims that are gone")
		return
	}
	for i, pc := range removed {
		delete(o.goneSince, expired[i])
		d.log.WithField("claim", pc.Namespace+"/"+pc.Name).WithField("cards", cardsOf(pc)).
			Warn("removed the checkpoint entry of a claim that no longer exists; it was never unprepared")
	}
	d.opts.Metrics.unprepare("orphaned", len(removed))
	d.opts.Metrics.setPrepared(n)
}

// claimGone asks the API server whether the claim recorded under uid is
// gone: NotFound, or a claim of that name with another UID.
func (d *Driver) claimGone(ctx context.Context, uid string, pc PreparedClaim) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := d.opts.API.GetClaim(ctx, pc.Namespace, pc.Name)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return c.UID != types.UID(uid), nil
}
