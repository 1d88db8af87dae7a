package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// burstGPU is how many GPU containers a burst creates at once.
const burstGPU = 10

// burstArms are the samples of the burst comparison. Each arm is a view
// of one of the container path's arms: the same sandbox, annotations and
// device check, its own times.
type burstArms struct {
	plainOn, plainOff, gpuOn, gpuOff *arm
}

// measureBurst times a plain container created at the same moment as
// burstGPU GPU containers (nri delivery), with dri-cdi-nri connected and
// without it. containerd's NRI adaptation handles CreateContainer of all
// plugins under one lock, so whatever dri-cdi-nri waits on for the GPU
// containers (the PodResources round trip) the plain container waits on
// too. Rounds run in blocks of burstBlock in ABBA order like the other
// container comparisons; a round starts all its containers from one gate
// and removes them only after the last one has started.
func (r *crirun) measureBurst(ctx context.Context, cfg Config) (*burstArms, error) {
	view := func(base *arm, name string) *arm {
		v := *base
		v.name, v.times = name, nil
		return &v
	}
	b := &burstArms{
		plainOn:  view(r.arms[armPlainOn], "burst: plain, dri-cdi-nri connected"),
		plainOff: view(r.arms[armPlainOff], "burst: plain, dri-cdi-nri disconnected"),
		gpuOn:    view(r.arms[armNRI], fmt.Sprintf("burst: %d GPU by dri-cdi-nri (nri delivery)", burstGPU)),
		gpuOff:   view(r.arms[armNRIOff], fmt.Sprintf("burst: %d GPU annotation only, dri-cdi-nri disconnected", burstGPU)),
	}
	rounds := max(2, cfg.Containers/5)
	block := min(burstBlock, rounds)
	blocks := (rounds + block - 1) / block
	start := time.Now()
	for bi := range 2 * blocks {
		on := abbaA(bi)
		toggled := on != r.connected
		if err := r.setNRI(ctx, on); err != nil {
			return nil, err
		}
		plain, gpu := b.plainOff, b.gpuOff
		if on {
			plain, gpu = b.plainOn, b.gpuOn
		}
		if toggled { // warm-up round, not counted
			if err := r.burstRound(ctx, plain, gpu, false); err != nil {
				return nil, err
			}
		}
		for range block {
			if err := r.burstRound(ctx, plain, gpu, true); err != nil {
				return nil, err
			}
		}
		logf("burst: block %d/%d (dri-cdi-nri %s) done in %v", bi+1, 2*blocks,
			map[bool]string{true: "connected", false: "disconnected"}[on], time.Since(start).Round(time.Second))
	}
	return b, r.setNRI(ctx, true)
}

// burstBlock is the number of burst rounds between two plugin toggles.
const burstBlock = 5

// burstRound creates one plain and burstGPU GPU containers at once, then
// checks and removes them.
func (r *crirun) burstRound(ctx context.Context, plain, gpu *arm, record bool) error {
	type job struct {
		a       *arm
		attempt uint32
		id      string
		d       time.Duration
		err     error
	}
	// The views share their base arm's sandbox, so attempts must not
	// repeat: they continue from the base arm's counter.
	base := func(v *arm) *arm {
		for _, a := range r.arms {
			if a.sandbox == v.sandbox {
				return a
			}
		}
		return v
	}
	jobs := make([]*job, 0, burstGPU+1)
	pb := base(plain)
	pb.attempt++
	jobs = append(jobs, &job{a: plain, attempt: pb.attempt})
	gb := base(gpu)
	for range burstGPU {
		gb.attempt++
		jobs = append(jobs, &job{a: gpu, attempt: gb.attempt})
	}
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			j.id, j.d, j.err = r.start(ctx, j.a, j.attempt)
		}()
	}
	close(gate)
	wg.Wait()
	var errs []error
	for _, j := range jobs {
		errs = append(errs, r.finish(ctx, j.a, j.id, j.err))
	}
	r.created += len(jobs)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if record {
		for _, j := range jobs {
			j.a.times = append(j.a.times, j.d)
		}
	}
	time.Sleep(settle)
	return nil
}
