package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// hotplugGPU is the card plugged in and out of the 16-card tree.
var hotplugGPU = drmtest.IntelXe.WithPCI("0000:e0:00.0").WithNodes(16, 144)

// agentBinary runs bin/dri-cdi-agent on a fake tree of 16 mixed GPUs with
// a fake kubelet (a real registration server that dials the agent back
// and keeps its ListAndWatch streams open, as the kubelet does), then
// measures Allocate over the agent's gRPC socket, hotplug, and the
// agent's RSS after that load.
func (b *bench) agentBinary() error {
	bin := filepath.Join(b.cfg.BinDir, "dri-cdi-agent")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w (run make build)", err)
	}
	dir := filepath.Join(b.tmp, "agent")
	tree, err := drmtest.NewTree(filepath.Join(dir, "tree"), drmtest.Mixed(16)...)
	if err != nil {
		return err
	}
	kdir, err := b.socketDir()
	if err != nil {
		return err
	}
	k, err := kubelettest.Start(kdir)
	if err != nil {
		return err
	}
	defer k.Stop()
	roots := tree.Roots()
	agent, err := startProcess("dri-cdi-agent", filepath.Join(dir, "agent.log"), bin,
		"--sysfs-root="+roots.Sysfs, "--dev-root="+roots.Dev,
		"--cdi-dir="+filepath.Join(dir, "cdi"), "--kubelet-dir="+kdir,
		"--delivery=cdi-cri", "--metrics-addr=127.0.0.1:0")
	if err != nil {
		return err
	}
	b.track(agent)
	defer agent.Stop(syscall.SIGTERM, 10*time.Second)

	resource := config.DefaultPoolResource(hotplugGPU.Driver)
	// Mixed(16) cycles through four drivers: four resources, four cards each.
	for _, g := range drmtest.Mixed(4) {
		res := config.DefaultPoolResource(g.Driver)
		if _, err := waitDevices(agent, k, res, 30*time.Second, func(ids []string) bool { return len(ids) == 4 }); err != nil {
			return err
		}
	}
	var errs []error
	errs = append(errs, b.measureAllocate(agent, k, resource))
	errs = append(errs, b.measureHotplug(agent, k, tree, resource))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	rss, err := runningRSS(agent)
	if err != nil {
		return err
	}
	return b.setRSS("agent_rss_mb", rss, "dri-cdi-agent (16 cards, 4 resources, metrics server on) after the Allocate and hotplug load")
}

// setRSS records a steady-state RSS key from its samples in MiB (of
// steadyRSS); what says what was measured, and the note adds how.
func (b *bench) setRSS(key string, samples []float64, what string) error {
	sum, err := Summarize(samples)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	b.report.Set(key, Result{Value: sum.Median, Sample: &sum, Note: what + "; " + rssMethod})
	b.report.Params.Repetitions[key] = sum.N
	logf("%s = %.3g MiB", key, sum.Median)
	return nil
}

// deviceIDs is the latest device list the agent sent for a resource.
func deviceIDs(k *kubelettest.Kubelet, resource string) []string {
	e := k.Endpoint(resource)
	if e == nil {
		return nil
	}
	var ids []string
	for _, d := range e.Devices() {
		ids = append(ids, d.ID)
	}
	return ids
}

// waitDevices polls the fake kubelet's view of a resource every 250 µs
// until ok holds, and returns how long that took.
func waitDevices(agent *harness.Process, k *kubelettest.Kubelet, resource string, timeout time.Duration, ok func([]string) bool) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		if ok(deviceIDs(k, resource)) {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			if !agent.Running() {
				return 0, agent.Exited()
			}
			return 0, fmt.Errorf("resource %s: device list %v did not change as expected within %v", resource, deviceIDs(k, resource), timeout)
		}
		time.Sleep(250 * time.Microsecond)
	}
}

// measureAllocate calls Allocate for one device, as the kubelet does at
// pod admission, over the connection the fake kubelet dialed to the
// agent's socket; the devices rotate.
func (b *bench) measureAllocate(agent *harness.Process, k *kubelettest.Kubelet, resource string) error {
	e := k.Endpoint(resource)
	if e == nil {
		return fmt.Errorf("resource %s is not registered", resource)
	}
	ids := deviceIDs(k, resource)
	ctx := context.Background()
	calls := b.cfg.allocateCalls
	ds := make([]time.Duration, 0, calls)
	runtime.GC()
	for i := range calls + calls/10 {
		id := ids[i%len(ids)]
		req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{id}}}}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		start := time.Now()
		resp, err := e.Client.Allocate(cctx, req)
		d := time.Since(start)
		cancel()
		if err != nil {
			return fmt.Errorf("allocate %s: %w", id, err)
		}
		if err := checkAllocate(resp, resource, id); err != nil {
			return err
		}
		if i >= calls/10 {
			ds = append(ds, d)
		}
	}
	return b.setSample("allocate_p99_us", time.Microsecond, ds, "p99",
		fmt.Sprintf("Allocate of 1 of %d devices over the agent's device plugin socket (gRPC, unix), cdi-cri delivery", len(ids)))
}

func checkAllocate(resp *pluginapi.AllocateResponse, resource, id string) error {
	crs := resp.GetContainerResponses()
	if len(crs) != 1 {
		return fmt.Errorf("allocate %s: %d container responses, want 1", id, len(crs))
	}
	cr := crs[0]
	want := cdi.QualifiedName(cdi.DefaultKind, id)
	if len(cr.GetCdiDevices()) != 1 || cr.GetCdiDevices()[0].GetName() != want {
		return fmt.Errorf("allocate %s: CDI devices %v, want %s", id, cr.GetCdiDevices(), want)
	}
	key, value := alloc.Annotation(resource, []string{id})
	if cr.GetAnnotations()[key] != value {
		return fmt.Errorf("allocate %s: annotations %v, want %s=%s", id, cr.GetAnnotations(), key, value)
	}
	return nil
}

// measureHotplug plugs a card into the fake tree and times until the
// fake kubelet's ListAndWatch stream lists it, then unplugs it and times
// until it is gone. The clock starts before the tree is changed, so the
// tree's own file work is included.
func (b *bench) measureHotplug(agent *harness.Process, k *kubelettest.Kubelet, tree *drmtest.Tree, resource string) error {
	id := hotplugGPU.ID()
	plug, unplug := make([]time.Duration, 0, b.cfg.hotplugReps), make([]time.Duration, 0, b.cfg.hotplugReps)
	has := func(ids []string) bool { return slices.Contains(ids, id) }
	for range b.cfg.hotplugReps + 1 {
		// Quiet time, so one pass's events do not join the next.
		time.Sleep(150 * time.Millisecond)
		start := time.Now()
		if err := tree.Add(hotplugGPU); err != nil {
			return err
		}
		if _, err := waitDevices(agent, k, resource, 10*time.Second, has); err != nil {
			return fmt.Errorf("hotplug: %w", err)
		}
		plug = append(plug, time.Since(start))
		time.Sleep(150 * time.Millisecond)
		start = time.Now()
		if err := tree.Remove(id); err != nil {
			return err
		}
		if _, err := waitDevices(agent, k, resource, 10*time.Second, func(ids []string) bool { return !has(ids) && len(ids) == 4 }); err != nil {
			return fmt.Errorf("hot-unplug: %w", err)
		}
		unplug = append(unplug, time.Since(start))
	}
	// The first pass warms up.
	if err := b.setSample("hotplug_ms", time.Millisecond, plug[1:], "median",
		"card added to the fake tree (drmtest.Tree.Add) until the fake kubelet's ListAndWatch stream lists it; agent binary, inotify, default debounce"); err != nil {
		return err
	}
	return b.setSample("hotunplug_ms", time.Millisecond, unplug[1:], "median",
		"card removed from the fake tree until the ListAndWatch stream no longer lists it")
}
