package agent

import (
	"context"
	"sync"

	"github.com/dri-cdi/dri-cdi/pkg/usage"
)

// startUsage runs the per-container usage scans (pkg/usage) next to the
// loop when --usage is on: on their own goroutine, off the Allocate and
// discovery paths, into the agent's registry. A backend that knows the
// DRA claims containers hold their cards through (usage.ClaimSource, the
// DRA driver) names them in each container's figures.
func (a *agent) startUsage(ctx context.Context, wg *sync.WaitGroup) {
	if !a.opts.Usage.Enabled {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		log := a.log.WithField("component", "usage")
		claims, _ := a.backend.(usage.ClaimSource)
		if err := usage.Run(ctx, a.opts.Usage, a.opts.Roots, claims, a.met.Registry, log); err != nil {
			log.WithError(err).Error("usage scans stopped")
		}
	}()
}
