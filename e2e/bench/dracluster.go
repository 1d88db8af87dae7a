package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/dra"
)

// draStartReps is how many timed starts dra_start_to_slice_ms takes,
// after one warm-up start.
const draStartReps = 10

// kubeletPrepareMethod is the kubelet's method_name label of the DRA
// NodePrepareResources call (v1 gRPC API).
const kubeletPrepareMethod = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"

// kubeletPrepare reads the kubelet's own dra_grpc_operations_duration_seconds
// of our driver's NodePrepareResources: the sum of the call times in
// seconds and their count. The histogram's buckets start at 0.1 s, too
// coarse for quantiles, so a sample is the sum's growth over one pod's
// start that made exactly one call.
func kubeletPrepare(ctx context.Context, n *harness.Node) (sum, count float64, err error) {
	m, err := n.KubeletMetrics(ctx)
	if err != nil {
		return 0, 0, err
	}
	sum, count = m.Histogram("dra_grpc_operations_duration_seconds", "driver_name", dra.DriverName, "method_name", kubeletPrepareMethod)
	return sum, count, nil
}

// oneSample is the growth of a histogram's sum (seconds) between two
// reads as one sample: the time of the one observation between them, and
// false when there was not exactly one (the kubelet's NodePrepareResources
// calls, the scheduler's scheduled attempts).
func oneSample(sum0, n0, sum1, n1 float64) (time.Duration, bool) {
	if n1-n0 != 1 {
		return 0, false
	}
	return time.Duration((sum1 - sum0) * float64(time.Second)), true
}

// setKubeletPrepare sets dra_prepare_kubelet_p50_us and _p99_us from the
// kubelet's times of the DRA arm's pods.
func (b *bench) setKubeletPrepare(ds []time.Duration, skipped int) error {
	note := fmt.Sprintf("NodePrepareResources of dri-cdi-dra (the DRA DaemonSet, product image) as the kubelet v1.37.2 times it: "+
		"the growth of its dra_grpc_operations_duration_seconds_sum (driver_name=%s) over each timed DRA pod's start that made exactly one call "+
		"(%d pods made none or several and are not in the sample); one new claim of one card each, so the call includes the helper's GET "+
		"of the claim from the real API server and the fsynced checkpoint write", dra.DriverName, skipped)
	return errors.Join(
		b.setSample("dra_prepare_kubelet_p50_us", time.Microsecond, ds, "median", note),
		b.setSample("dra_prepare_kubelet_p99_us", time.Microsecond, ds, "p99", note))
}

// draStartToSlice times bin/dri-cdi-dra as a host process on the
// cluster's node, from its start until the API server sends a watch
// event of a ResourceSlice of the driver for the node with every card:
// dra_start_to_slice_ms. The node must be in device-plugin mode (no DRA
// DaemonSet); the plugin registers with the node's kubelet as the
// DaemonSet would. Before each start the node's slices are deleted, so
// every start publishes a new one, as on a fresh node.
func (b *bench) draStartToSlice(ctx context.Context, c *harness.Cluster, cards int) error {
	bin := filepath.Join(b.cfg.BinDir, "dri-cdi-dra")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%w (run make build)", err)
	}
	client, err := clusterClient(c)
	if err != nil {
		return err
	}
	slices := client.ResourceV1().ResourceSlices()
	selector := fields.Set{resourceapi.ResourceSliceSelectorDriver: dra.DriverName,
		resourceapi.ResourceSliceSelectorNodeName: harness.NodeName}.String()
	short, err := b.socketDir()
	if err != nil {
		return err
	}
	dir := filepath.Join(b.tmp, "dra-cluster")
	if err := os.MkdirAll(filepath.Join(dir, "cdi"), 0o755); err != nil {
		return err
	}
	n := c.Node
	times := make([]time.Duration, 0, draStartReps)
	for i := range draStartReps + 1 {
		if err := deleteSlices(ctx, slices, selector); err != nil {
			return err
		}
		list, err := slices.List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return err
		}
		w, err := slices.Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return err
		}
		logPath := filepath.Join(dir, fmt.Sprintf("dra-%d.log", i))
		start := time.Now()
		p, err := startProcess("dri-cdi-dra", logPath, bin, "--node-name="+harness.NodeName, "--kubeconfig="+c.Kubeconfig,
			"--sysfs-root="+n.SysfsRoot, "--dev-root="+n.DevRoot, "--cdi-dir="+filepath.Join(dir, "cdi"),
			"--registrar-dir="+n.PluginsRegistryDir(), "--plugin-data-dir="+filepath.Join(short, fmt.Sprintf("d%d", i)),
			"--metrics-addr=127.0.0.1:0", "--log-level=debug")
		if err != nil {
			w.Stop()
			return err
		}
		b.track(p)
		seen, err := waitSlice(w, cards, 30*time.Second)
		w.Stop()
		if i == draStartReps {
			// Untimed: let the last start log the creation's return,
			// which races the watch event.
			waitLog(logPath, "ResourceSlice published", 3*time.Second)
		}
		p.Stop(syscall.SIGTERM, 10*time.Second)
		if err != nil {
			return fmt.Errorf("dri-cdi-dra start %d: %w; last lines of its log:\n%s", i, err, tail(logPath, 20))
		}
		if i > 0 {
			times = append(times, seen.Sub(start))
		}
		if i == draStartReps {
			logStartupSteps(logPath)
		}
	}
	if err := deleteSlices(ctx, slices, selector); err != nil {
		return err
	}
	return b.setSample("dra_start_to_slice_ms", time.Millisecond, times, "median", fmt.Sprintf(
		"bin/dri-cdi-dra started as a host process on the real cluster's node (%d fake cards, its kubelet v1.37.2, the API server v1.37.2) "+
			"until the bench's watch on the node's ResourceSlices of %s receives one listing every card; the node's slices deleted before each "+
			"start; %d starts after one warm-up", cards, dra.DriverName, draStartReps))
}

// clusterClient is a client of c's API server as its admin.
func clusterClient(c *harness.Cluster) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster kubeconfig: %w", err)
	}
	return kubernetes.NewForConfig(cfg)
}

// waitSlice returns when w sent a slice with cards devices.
func waitSlice(w watch.Interface, cards int, timeout time.Duration) (time.Time, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return time.Time{}, errors.New("the ResourceSlice watch ended")
			}
			now := time.Now()
			if s, ok := ev.Object.(*resourceapi.ResourceSlice); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) && len(s.Spec.Devices) == cards {
				return now, nil
			}
		case <-timer.C:
			return time.Time{}, fmt.Errorf("no ResourceSlice with %d devices within %v", cards, timeout)
		}
	}
}

// deleteSlices deletes the slices selector selects and waits until none
// is listed.
func deleteSlices(ctx context.Context, slices interface {
	DeleteCollection(context.Context, metav1.DeleteOptions, metav1.ListOptions) error
	List(context.Context, metav1.ListOptions) (*resourceapi.ResourceSliceList, error)
}, selector string) error {
	if err := slices.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: selector}); err != nil {
		return fmt.Errorf("delete the node's ResourceSlices: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := slices.List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err == nil && len(list.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the node's ResourceSlices are still listed 30s after their deletion (last error %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logStartupSteps prints the plugin's own account of its last start (its
// debug "startup step" lines): where the time went.
func logStartupSteps(logPath string) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		logf("dri-cdi-dra's startup steps: %v", err)
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "startup step") || strings.Contains(l, "ResourceSlice published") {
			logf("dri-cdi-dra: %s", l)
		}
	}
}

// Breakdown pods: prepared by the DRA DaemonSet at debug level.
const breakdownPods = 5

// The DRA DaemonSet's namespace, name and pods.
const (
	draNS        = "dri-cdi"
	draDaemonSet = "dri-cdi-dra"
	draPods      = "app.kubernetes.io/component=dra-node"
)

// setDRALogLevel replaces the DRA DaemonSet's --log-level=from argument
// by --log-level=to.
func setDRALogLevel(ctx context.Context, c *harness.Cluster, from, to string) error {
	var ds struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name string   `json:"name"`
						Args []string `json:"args"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := c.GetJSON(ctx, &ds, "daemonset", draDaemonSet, "-n", draNS); err != nil {
		return err
	}
	for ci, ctr := range ds.Spec.Template.Spec.Containers {
		for ai, a := range ctr.Args {
			if a != "--log-level="+from {
				continue
			}
			patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/template/spec/containers/%d/args/%d","value":"--log-level=%s"}]`, ci, ai, to)
			if out, err := c.Kubectl(ctx, "-n", draNS, "patch", "daemonset", draDaemonSet, "--type=json", "-p", patch); err != nil {
				return fmt.Errorf("log level %s: %w: %s", to, err, out)
			}
			return nil
		}
	}
	return fmt.Errorf("the DRA DaemonSet has no --log-level=%s argument", from)
}

// draPrepareBreakdown runs breakdownPods more DRA pods with the DRA
// DaemonSet at --log-level=debug (after the timed blocks: debug logging
// is not what users run) and prints, from its log, the medians of each
// NodePrepareResources in the plugin (its gRPC handler, which includes
// the helper's GET of the claim) and of our part of it
// (PrepareResourceClaims: the claim store, the checkpoint's fsynced
// write), next to the kubelet's time of the same calls.
func (b *bench) draPrepareBreakdown(ctx context.Context, c *harness.Cluster) error {
	if err := setDRALogLevel(ctx, c, "info", "debug"); err != nil {
		return err
	}
	defer func() {
		if err := setDRALogLevel(ctx, c, "debug", "info"); err != nil {
			logf("reset the DRA DaemonSet's log level: %v", err)
		}
	}()
	if err := setMode(ctx, c, armDRA); err != nil {
		return err
	}
	getSum0, getN0, err := apiServerClaimGets(ctx, c)
	if err != nil {
		return err
	}
	var kubelet []time.Duration
	for j := range breakdownPods + 1 {
		sum0, n0, err := kubeletPrepare(ctx, c.Node)
		if err != nil {
			return err
		}
		if _, err := podStart(ctx, c, fmt.Sprintf("bench-breakdown-%d", j)); err != nil {
			return err
		}
		sum1, n1, err := kubeletPrepare(ctx, c.Node)
		if err != nil {
			return err
		}
		if d, ok := oneSample(sum0, n0, sum1, n1); ok && j > 0 {
			kubelet = append(kubelet, d)
		}
	}
	getSum1, getN1, err := apiServerClaimGets(ctx, c)
	if err != nil {
		return err
	}
	if n := getN1 - getN0; n > 0 {
		logf("prepare breakdown, the API server's own time of a claim GET (apiserver_request_duration_seconds, its GETs of resourceclaims "+
			"over these pods, the kubelet's and the plugin's): mean %.0f us, n %.0f", (getSum1-getSum0)/n*1e6, n)
	}
	pods, err := c.Pods(ctx, draNS, draPods)
	if err != nil || len(pods) != 1 {
		return fmt.Errorf("the DRA pod: %d pods, %v", len(pods), err)
	}
	out, err := c.ContainerLogs(ctx, &pods[0], "dra")
	if err != nil {
		return err
	}
	var handler, ours []time.Duration
	for _, l := range strings.Split(out, "\n") {
		// The DaemonSet logs JSON (--log-format=json).
		var e struct {
			Msg    string  `json:"msg"`
			Method string  `json:"method"`
			US     float64 `json:"us"`
			Step   string  `json:"step"`
			Since  float64 `json:"sinceStartMs"`
		}
		if json.Unmarshal([]byte(l), &e) != nil {
			continue
		}
		d := time.Duration(e.US) * time.Microsecond
		switch {
		case e.Msg == "gRPC call" && e.Method == kubeletPrepareMethod:
			handler = append(handler, d)
		case e.Msg == "PrepareResourceClaims done":
			ours = append(ours, d)
		case e.Msg == "startup step":
			logf("dri-cdi-dra DaemonSet: startup step %q at %.1f ms", e.Step, e.Since)
		}
	}
	// The first prepare of the fresh pod is the untimed one.
	if len(handler) > 1 && len(ours) > 1 {
		handler, ours = handler[1:], ours[1:]
	}
	for _, s := range []struct {
		name string
		ds   []time.Duration
	}{{"kubelet (dra_grpc_operations_duration_seconds)", kubelet}, {"plugin's gRPC handler (claim GET + ours)", handler},
		{"ours (PrepareResourceClaims: claim store + fsynced checkpoint write)", ours}} {
		sum, err := Summarize(In(time.Microsecond, s.ds))
		if err != nil {
			return fmt.Errorf("prepare breakdown, %s: %w", s.name, err)
		}
		logf("prepare breakdown, %s: median %.0f us, min %.0f, max %.0f, n %d", s.name, sum.Median, sum.Min, sum.Max, sum.N)
	}
	return nil
}

// waitLog waits until the file at path contains marker, at most timeout.
func waitLog(path, marker string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), marker) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// apiServerClaimGets reads the API server's apiserver_request_duration_seconds
// of GETs of resourceclaims: the sum of their times in seconds and their
// count.
func apiServerClaimGets(ctx context.Context, c *harness.Cluster) (sum, count float64, err error) {
	out, err := c.Kubectl(ctx, "get", "--raw", "/metrics")
	if err != nil {
		return 0, 0, fmt.Errorf("the API server's metrics: %w", err)
	}
	m, err := harness.ParseMetrics(out)
	if err != nil {
		return 0, 0, err
	}
	sum, count = m.Histogram("apiserver_request_duration_seconds", "verb", "GET", "resource", "resourceclaims")
	return sum, count, nil
}
