package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// The scheduler's placement of share claims against exclusive claims, on
// one real single-node cluster with the DRA DaemonSet: one card of a pool
// with shares (its own PCI device ID, so a pool can take it alone) and
// as many cards of the default, exclusive i915 pool as a block has pods.
// A block creates its pods one at a time (the next once the last runs),
// each with a claim from a template asking for one device of its arm's
// pool, and keeps them until the block ends: the k-th claim of a block is placed next to k-1
// allocations of its pool in both arms (k-1 shares of the one card, or
// k-1 of the exclusive cards held). The time is the scheduler's own:
// the growth of kube-scheduler's scheduling_attempt_duration_seconds_sum
// {result="scheduled"} over the pod's placement, from the start of its
// scheduling cycle through the binding cycle, which writes the claim's
// allocation (the DynamicResources plugin's PreBind). Its histogram's
// buckets are too coarse for quantiles, so a sample is the sum's growth
// over one pod that made exactly one scheduled attempt.
const (
	schedStep          = "the scheduler's placement of share claims vs exclusive claims"
	armShared          = "shared"
	armExclusive       = "exclusive"
	schedSharedPool    = "dri-cdi.dev/shared"
	schedExclusivePool = "dri-cdi.dev/i915"
	// schedSharedDeviceID is the shared card's PCI device ID (another
	// Intel iGPU's), which only the shares pool takes.
	schedSharedDeviceID = "a7a0"
	schedMetric         = "scheduler_scheduling_attempt_duration_seconds"
)

// schedConfig is the user's config of the step: the shared card in a pool
// of shares, one per pod of a block; the others in the default pool.
func schedConfig(shares int) string {
	return fmt.Sprintf("pools:\n- resource: %s\n  pciIDs: [\"8086:%s\"]\n  shares: %d\n", schedSharedPool, schedSharedDeviceID, shares)
}

// schedulePlacement runs the step on the suite's node:
// dra_schedule_shared_p50_us, dra_schedule_exclusive_p50_us and
// dra_schedule_shared_vs_exclusive_ratio.
func (b *bench) schedulePlacement(ctx context.Context, suite *harness.Suite) error {
	// Twice the pod start's blocks: a placement takes tens of ms, and its
	// spread is wide.
	blocks, per := 2*b.cfg.clusterBlocks, b.cfg.clusterPodsPerBlock
	shared := harness.IntelGPU(0)
	shared.Device = schedSharedDeviceID
	gpus := []drmtest.GPU{shared}
	for i := 1; i <= per; i++ {
		gpus = append(gpus, harness.IntelGPU(i))
	}
	c, err := suite.StartCluster(ctx, stderrLogger{}, harness.ClusterOptions{Name: "bench-schedule", GPUs: gpus})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.RequireDRA(ctx); err != nil {
		return err
	}
	overlay, err := c.WriteDRAOverlayWith(filepath.Join(c.Dir, "overlay-dra"), harness.OverlayOptions{Config: schedConfig(per)})
	if err != nil {
		return err
	}
	if out, err := c.Kubectl(ctx, "apply", "-k", overlay); err != nil {
		return fmt.Errorf("apply the DRA overlay: %w: %s", err, out)
	}
	if err := c.LabelNode(ctx, modeLabel, "dra"); err != nil {
		return err
	}
	if err := c.WaitDaemonSetReady(ctx, draNS, draDaemonSet, 3*time.Minute); err != nil {
		return err
	}
	if err := waitSliceDevices(ctx, c, len(gpus)); err != nil {
		return err
	}
	templates := map[string]string{armShared: "sched-shared", armExclusive: "sched-exclusive"}
	for arm, pool := range map[string]string{armShared: schedSharedPool, armExclusive: schedExclusivePool} {
		tmpl := harness.ResourceClaimTemplate(templates[arm], "i915.dri-cdi.dev", fmt.Sprintf(`device.attributes["dri-cdi.dev"].resource == %q`, pool))
		if out, err := c.KubectlStdin(ctx, tmpl, "apply", "-f", "-"); err != nil {
			return fmt.Errorf("template %s: %w: %s", templates[arm], err, out)
		}
	}
	client, err := clusterClient(c)
	if err != nil {
		return err
	}
	s := &scheduling{c: c, client: client}
	// One untimed pod of each arm: the scheduler's first claim of a pool
	// fills caches later ones reuse.
	for _, arm := range []string{armShared, armExclusive} {
		if _, _, err := s.place(ctx, "sched-warm-"+arm, templates[arm]); err != nil {
			return fmt.Errorf("%s warm-up: %w", arm, err)
		}
		if err := s.clear(ctx); err != nil {
			return err
		}
	}
	arms := map[string]*arm{armShared: {name: armShared}, armExclusive: {name: armExclusive}}
	notOne, n := 0, 0
	for bi := range 2 * blocks {
		mode := armExclusive
		if abbaA(bi) {
			mode = armShared
		}
		for range per {
			n++
			d, ok, err := s.place(ctx, fmt.Sprintf("sched-%d", n), templates[mode])
			if err != nil {
				return fmt.Errorf("%s pod %d: %w", mode, n, err)
			}
			if !ok {
				notOne++
				continue
			}
			arms[mode].times = append(arms[mode].times, d)
		}
		if err := s.clear(ctx); err != nil {
			return err
		}
		logf("%s block %d: %d pods", mode, bi, per)
	}
	b.report.Params.Repetitions["dra_schedule_shared_vs_exclusive_ratio blocks"] = 2 * blocks
	note := fmt.Sprintf("kube-scheduler v1.37.2's own time to place a pod with one ResourceClaim (from a template) of one device of %%s: "+
		"the growth of %s_sum{result=\"scheduled\"} over the pod, scheduling cycle through binding (the DynamicResources plugin's PreBind "+
		"writes the claim's allocation); %d blocks of %d pods per arm in ABBA order, the pods of a block kept until it ends, so the k-th "+
		"claim is placed next to k-1 allocations of its pool (the shared card: %d shares; the exclusive pool: %d cards); one untimed pod "+
		"per arm first; %d pods made not exactly one scheduled attempt and are not in the sample", schedMetric, blocks, per, per, per, notOne)
	return errors.Join(
		b.setSample("dra_schedule_shared_p50_us", time.Microsecond, arms[armShared].times, "median",
			fmt.Sprintf(note, "one share of a shared card (pool shares: "+fmt.Sprint(per)+")")),
		b.setSample("dra_schedule_exclusive_p50_us", time.Microsecond, arms[armExclusive].times, "median",
			fmt.Sprintf(note, "an exclusive card")),
		b.setRatio("dra_schedule_shared_vs_exclusive_ratio", arms[armShared], arms[armExclusive], fmt.Sprintf(note, "one share vs an exclusive card")))
}

// waitSliceDevices waits until the node's slices list n devices.
func waitSliceDevices(ctx context.Context, c *harness.Cluster, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		devs, err := c.ResourceSliceDevices(ctx, "dri-cdi.dev")
		if err == nil && len(devs) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the node's ResourceSlices list %d devices after 2m, want %d (last error %v)", len(devs), n, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// scheduling places pods and reads the scheduler's times of them.
type scheduling struct {
	c      *harness.Cluster
	client kubernetes.Interface
}

// scheduled is the sum and count of the scheduler's scheduled attempts.
func (s *scheduling) scheduled(ctx context.Context) (sum, count float64, err error) {
	m, err := s.c.SchedulerMetrics(ctx)
	if err != nil {
		return 0, 0, err
	}
	sum, count = m.Histogram(schedMetric, "result", "scheduled")
	return sum, count, nil
}

// place creates a pod with a claim from template and waits until the
// scheduler placed it and counted it. It returns the scheduler's time of
// the pod, and false when the pod took not exactly one scheduled
// attempt (or others were counted meanwhile).
func (s *scheduling) place(ctx context.Context, name, template string) (time.Duration, bool, error) {
	var pod corev1.Pod
	if err := yaml.Unmarshal([]byte(harness.ClaimPod(name, harness.ClaimRef{Template: template})), &pod); err != nil {
		return 0, false, err
	}
	sum0, n0, err := s.scheduled(ctx)
	if err != nil {
		return 0, false, err
	}
	pods := s.client.CoreV1().Pods("default")
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return 0, false, err
	}
	defer w.Stop()
	if _, err := pods.Create(ctx, &pod, metav1.CreateOptions{}); err != nil {
		return 0, false, fmt.Errorf("create: %w", err)
	}
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for placed := false; !placed; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return 0, false, errors.New("the pod watch ended")
			}
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Spec.NodeName != "" {
				placed = true
			}
		case <-timeout.C:
			return 0, false, fmt.Errorf("pod %s not placed within 1m", name)
		}
	}
	// The scheduler counts the attempt once its binding cycle returned,
	// which races the pod's update.
	deadline := time.Now().Add(10 * time.Second)
	var (
		d  time.Duration
		ok bool
	)
	for {
		sum1, n1, err := s.scheduled(ctx)
		if err != nil {
			return 0, false, err
		}
		if n1 > n0 {
			d, ok = oneSample(sum0, n0, sum1, n1)
			break
		}
		if time.Now().After(deadline) {
			return 0, false, fmt.Errorf("pod %s placed, but the scheduler counted no scheduled attempt within 10s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The next pod is placed once this one runs, not while the kubelet
	// starts it on the same two cores.
	for {
		select {
		case ev, open := <-w.ResultChan():
			if !open {
				return 0, false, errors.New("the pod watch ended")
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod && p.Status.Phase == corev1.PodRunning {
				return d, ok, nil
			}
		case <-timeout.C:
			return 0, false, fmt.Errorf("pod %s not running within 1m", name)
		}
	}
}

// clear deletes the default namespace's pods and waits until they and
// their claims are gone, so the next block finds every card free.
func (s *scheduling) clear(ctx context.Context) error {
	pods := s.client.CoreV1().Pods("default")
	grace := int64(1)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the block's pods: %w", err)
	}
	claims := s.client.ResourceV1().ResourceClaims("default")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pl, perr := pods.List(ctx, metav1.ListOptions{})
		cl, cerr := claims.List(ctx, metav1.ListOptions{})
		if perr == nil && cerr == nil && len(pl.Items) == 0 && len(cl.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the block's pods and claims are still listed 2m after their deletion (errors %v, %v)", perr, cerr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
