package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// The pod start through the scheduler: a stock pod asking for
// dri-cdi.dev/i915: 1, served by DRA (the node labelled
// dri-cdi.dev/mode=dra: the scheduler makes the pod's claim from the
// DeviceClass's extendedResourceName, the kubelet prepares it through
// dri-cdi-dra) and by the device plugin (label removed: Allocate), on the
// same real single-node cluster, in ABBA blocks.
const (
	clusterResource = "dri-cdi.dev/i915"
	armDevicePlugin = "device-plugin"
	armDRA          = "dra"
	modeLabel       = "dri-cdi.dev/mode"
)

// clusterPodStart starts the e2e cluster on the suite (after the
// container path closed its node), deploys the DRA overlay (both
// DaemonSets, the node's label choosing one), and times pod create to
// Ready, as `kubectl create` then `kubectl wait --for=condition=Ready`,
// in each mode: dra_pod_start_ratio.
func (b *bench) clusterPodStart(ctx context.Context, suite *harness.Suite) error {
	c, err := suite.StartCluster(ctx, stderrLogger{}, harness.ClusterOptions{
		Name: "bench", GPUs: []drmtest.GPU{harness.IntelGPU(0), harness.IntelGPU(1)}})
	if err != nil {
		return err
	}
	defer c.Close()
	overlay, err := c.WriteDRAOverlay(filepath.Join(c.Dir, "overlay-dra"))
	if err != nil {
		return err
	}
	if out, err := c.Kubectl(ctx, "apply", "-k", overlay); err != nil {
		return fmt.Errorf("apply the DRA overlay: %w: %s", err, out)
	}
	arms := map[string]*arm{armDevicePlugin: {name: armDevicePlugin}, armDRA: {name: armDRA}}
	blocks, per := b.cfg.clusterBlocks, b.cfg.clusterPodsPerBlock
	n := 0
	// The kubelet's own times of the DRA pods' NodePrepareResources.
	var prepares []time.Duration
	notOne := 0
	for i := range 2 * blocks {
		// ABBA: device plugin, DRA, DRA, device plugin, ...
		mode := armDevicePlugin
		if (i+1)/2%2 == 1 {
			mode = armDRA
		}
		if err := setMode(ctx, c, mode); err != nil {
			return err
		}
		// One untimed pod after every switch: the first claim or
		// Allocate of a fresh plugin dials and caches what later ones
		// reuse.
		for j := range per + 1 {
			n++
			sum0, n0, err := kubeletPrepare(ctx, c.Node)
			if err != nil {
				return err
			}
			d, err := podStart(ctx, c, fmt.Sprintf("bench-%d", n))
			if err != nil {
				return fmt.Errorf("%s pod %d: %w", mode, n, err)
			}
			sum1, n1, err := kubeletPrepare(ctx, c.Node)
			if err != nil {
				return err
			}
			if j > 0 {
				arms[mode].times = append(arms[mode].times, d)
				if p, ok := oneSample(sum0, n0, sum1, n1); ok && mode == armDRA {
					prepares = append(prepares, p)
				} else if mode == armDRA {
					notOne++
				}
			}
		}
		logf("%s block %d: %d pods", mode, i, per)
	}
	b.report.Params.Repetitions["dra_pod_start_ratio blocks"] = 2 * blocks
	errs := []error{b.setKubeletPrepare(prepares, notOne), b.draPrepareBreakdown(ctx, c)}
	// Start to slice with the plugin as a host process: no DaemonSet of it
	// may run.
	if err := setMode(ctx, c, armDevicePlugin); err != nil {
		return err
	}
	errs = append(errs, b.draStartToSlice(ctx, c, 2))
	return errors.Join(append(errs, b.setRatio("dra_pod_start_ratio", arms[armDRA], arms[armDevicePlugin], fmt.Sprintf(
		"pod create to Ready (kubectl create, then kubectl wait --for=condition=Ready) of a pod asking for %s: 1 through the scheduler, "+
			"served by DRA (extended resource through the DeviceClass) vs by the device plugin, on one single-node cluster; "+
			"%d blocks of %d pods per arm in ABBA order, one untimed pod after each mode switch", clusterResource, blocks, per)))...)
}

// setMode switches the node to one mode and waits until only that mode's
// DaemonSet runs and serves the cards.
func setMode(ctx context.Context, c *harness.Cluster, mode string) error {
	const ns = "dri-cdi"
	label, ds, other := "", "dri-cdi", "app.kubernetes.io/component=dra-node"
	if mode == armDRA {
		label, ds, other = "dra", "dri-cdi-dra", "app.kubernetes.io/component=node"
	}
	if err := c.LabelNode(ctx, modeLabel, label); err != nil {
		return err
	}
	if err := c.WaitDaemonSetReady(ctx, ns, ds, 3*time.Minute); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pods, err := c.Pods(ctx, ns, other)
		ok := err == nil && len(pods) == 0
		if ok && mode == armDRA {
			var devs map[string]harness.SliceDevice
			devs, err = c.ResourceSliceDevices(ctx, "dri-cdi.dev")
			n, aerr := c.Allocatable(ctx, clusterResource)
			// The scheduler serves the resource by DRA where the node's
			// allocatable is 0.
			ok = err == nil && aerr == nil && len(devs) == 2 && n == 0
		}
		if ok && mode == armDevicePlugin {
			n, aerr := c.Allocatable(ctx, clusterResource)
			ok = aerr == nil && n == 2
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node not in %s mode after 2m (last error %v)", mode, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// podStart creates a pod asking for one card and times it to Ready, then
// deletes it (untimed).
func podStart(ctx context.Context, c *harness.Cluster, name string) (time.Duration, error) {
	manifest := harness.GPUPod(name, clusterResource, 1)
	start := time.Now()
	if out, err := c.KubectlStdin(ctx, manifest, "create", "-f", "-"); err != nil {
		return 0, fmt.Errorf("create: %w: %s", err, out)
	}
	if out, err := c.Kubectl(ctx, "wait", "--for=condition=Ready", "pod/"+name, "-n", "default", "--timeout=120s"); err != nil {
		desc, _ := c.Kubectl(ctx, "describe", "pod", name, "-n", "default")
		return 0, fmt.Errorf("wait Ready: %w: %s\n%s", err, out, desc)
	}
	d := time.Since(start)
	if out, err := c.Kubectl(ctx, "delete", "pod", name, "-n", "default", "--wait=true", "--grace-period=1"); err != nil {
		return 0, fmt.Errorf("delete: %w: %s", err, out)
	}
	return d, nil
}
