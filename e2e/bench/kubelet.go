package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// registrationPoll is how often the kubelet's registration counter is
// read while a start is timed: often enough to resolve tens of ms, rare
// enough that scraping the kubelet's /metrics does not load the machine.
const registrationPoll = 5 * time.Millisecond

// Repetitions of the two real-kubelet start keys.
const (
	coldStartReps      = 10
	kubeletRestartReps = 5
)

// measureKubeletStarts times, on the node's real kubelet, how long
// dri-cdi-agent takes from its start until the kubelet has registered all
// four of its resources (cold start), and how long the agent takes to
// register again after the kubelet restarts (from the kubelet's start to
// its registration of all four resources). The registrations are read
// from the kubelet's kubelet_device_plugin_registration_total, which
// counts per resource. The agent is stopped at the end.
func (b *bench) measureKubeletStarts(ctx context.Context, node *harness.Node) error {
	var resources []string
	for _, g := range drmtest.Mixed(4) {
		resources = append(resources, config.DefaultPoolResource(g.Driver))
	}
	// registered waits until every resource counts at least want[r]
	// registrations.
	registered := func(want map[string]int, timeout time.Duration) error {
		deadline := time.Now().Add(timeout)
		for {
			ok := true
			for _, r := range resources {
				n, err := node.Registrations(ctx, r)
				if err != nil || n < want[r] {
					ok = false
					break
				}
			}
			if ok {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the kubelet did not register %v within %v", want, timeout)
			}
			time.Sleep(registrationPoll)
		}
	}
	counts := func() (map[string]int, error) {
		out := map[string]int{}
		for _, r := range resources {
			n, err := node.Registrations(ctx, r)
			if err != nil {
				return nil, err
			}
			out[r] = n
		}
		return out, nil
	}
	plusOne := func(m map[string]int) map[string]int {
		out := map[string]int{}
		for k, v := range m {
			out[k] = v + 1
		}
		return out
	}
	defer node.StopAgent()

	cold := make([]time.Duration, 0, coldStartReps)
	for i := range coldStartReps + 1 {
		before, err := counts()
		if err != nil {
			return err
		}
		start := time.Now()
		if err := node.StartAgent(ctx, harness.DeliveryCDICRI); err != nil {
			return err
		}
		if err := registered(plusOne(before), 30*time.Second); err != nil {
			return fmt.Errorf("agent cold start: %w", err)
		}
		d := time.Since(start)
		if i > 0 { // the first start writes the specs into an empty dir
			cold = append(cold, d)
		}
		if i < coldStartReps {
			node.StopAgent()
		}
	}
	var errs []error
	errs = append(errs, b.setSample("agent_cold_start_ms", time.Millisecond, cold, "median", fmt.Sprintf(
		"dri-cdi-agent (16 fake cards, cdi-cri) started until the real kubelet counts a new registration of each of its 4 resources; "+
			"polled every %v; %d starts after one warm-up", registrationPoll, coldStartReps)))

	restart := make([]time.Duration, 0, kubeletRestartReps)
	for range kubeletRestartReps {
		node.StopKubelet()
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- node.StartKubelet(ctx) }()
		// A new kubelet counts from zero.
		err := registered(plusOne(map[string]int{}), 60*time.Second)
		d := time.Since(start)
		if serr := <-done; serr != nil {
			return errors.Join(append(errs, serr)...)
		}
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("kubelet restart: %w", err))...)
		}
		restart = append(restart, d)
	}
	errs = append(errs, b.setSample("kubelet_restart_reregister_ms", time.Millisecond, restart, "median", fmt.Sprintf(
		"the real kubelet started again (after SIGTERM) until it counts a registration of each of the agent's 4 resources; "+
			"polled every %v; %d restarts", registrationPoll, kubeletRestartReps)))
	return errors.Join(errs...)
}
