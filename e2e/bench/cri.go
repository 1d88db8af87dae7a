package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
)

// Arms of the container comparisons.
const (
	armPlainOn  = "plain, dri-cdi-nri connected"
	armPlainOff = "plain, dri-cdi-nri disconnected"
	armCDIOn    = "GPU by runtime CDI (cdi-cri), dri-cdi-nri connected"
	armCDIOff   = "GPU by runtime CDI (cdi-cri), dri-cdi-nri disconnected"
	armNRI      = "GPU by dri-cdi-nri (nri delivery)"
	// armNRIOff is the nri-delivery container without the plugin: it
	// carries the annotation and gets no device. It keeps the blocks alike
	// (three containers per round with the plugin and without).
	armNRIOff = "GPU annotation only, dri-cdi-nri disconnected (no device)"
)

// settle is the pause after a container is removed, so that containerd's
// cleanup of one container does not run into the next one's timing.
const settle = 20 * time.Millisecond

const benchNamespace = "bench"

// arm is one kind of container measured through CRI.
type arm struct {
	name    string
	sandbox string // pod sandbox ID
	pod     *runtimeapi.PodSandboxConfig
	// cdi names the CDI device the kubelet would pass (cdi-cri delivery).
	cdi string
	// annotations are what Allocate returned (the allocation annotation).
	annotations map[string]string
	// devicePath is the node the container must have, "" for none.
	devicePath string
	times      []time.Duration
	attempt    uint32
}

// crirun is the container path through one real containerd.
type crirun struct {
	node    *harness.Node
	rt      runtimeapi.RuntimeServiceClient
	card    drm.Card
	arms    map[string]*arm
	created int
	// connected says whether dri-cdi-nri runs (it starts disconnected).
	connected bool
}

// newSuite sets up the e2e harness: it waits for the machine-wide lock
// (one harness node per machine, which also keeps an e2e run from loading
// the machine during the whole bench), checks the tools and builds the
// images.
func (b *bench) newSuite(ctx context.Context) (*harness.Suite, error) {
	os.Setenv(harness.EnvProductBin, b.cfg.BinDir)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	logf("waiting for the e2e machine lock %s", harness.LockPath)
	return harness.NewSuite(ctx, stderrLogger{})
}

// containerPath starts containerd (with runc) through the e2e harness and
// times container create+start through its CRI API, with and without
// dri-cdi-nri connected, and for GPU containers injected by the runtime's
// CDI and by dri-cdi-nri, interleaved. The kubelet is stopped: it would
// remove pod sandboxes it did not create. dri-cdi-nri asks a fake
// PodResources server in this process instead.
func (b *bench) containerPath(ctx context.Context, suite *harness.Suite) error {
	kubelet, err := b.startPodResources()
	if err != nil {
		return err
	}
	defer kubelet.Stop()

	node, err := suite.StartNode(ctx, stderrLogger{}, harness.NodeOptions{
		Name: "bench",
		GPUs: drmtest.Mixed(16),
		// As deployed: info logs, metrics served.
		NRIArgs: []string{"--pod-resources-socket=" + kubelet.Socket(), "--log-level=info", "--metrics-addr=127.0.0.1:0"},
	})
	if err != nil {
		return err
	}
	defer node.Close()
	if err := b.measureKubeletPodResources(ctx, node); err != nil {
		logf("PodResources against the kubelet: %v", err)
		b.report.Fail("podresources_kubelet_p99_us", err)
	}
	if err := b.measureKubeletStarts(ctx, node); err != nil {
		logf("agent and kubelet starts: %v", err)
		b.report.Fail("agent_cold_start_ms and kubelet_restart_reregister_ms", err)
	}
	node.StopKubelet()

	r := &crirun{node: node, arms: map[string]*arm{}}
	if err := r.writeSpecs(); err != nil {
		return err
	}
	conn, err := grpc.NewClient("unix://"+node.ContainerdSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	r.rt = runtimeapi.NewRuntimeServiceClient(conn)
	b.recordVersions(ctx, r.rt, suite)

	resource := config.DefaultPoolResource(r.card.Driver)
	qname := cdi.QualifiedName(cdi.DefaultKind, r.card.ID)
	akey, aval := alloc.Annotation(resource, []string{r.card.ID})
	render := r.card.RenderNode.Path
	for _, a := range []*arm{
		{name: armPlainOn}, {name: armPlainOff},
		{name: armCDIOn, cdi: qname, annotations: map[string]string{akey: aval}, devicePath: render},
		{name: armCDIOff, cdi: qname, annotations: map[string]string{akey: aval}, devicePath: render},
		{name: armNRI, annotations: map[string]string{akey: aval}, devicePath: render},
		{name: armNRIOff, annotations: map[string]string{akey: aval}},
	} {
		podName := fmt.Sprintf("bench-%d", len(r.arms))
		if a.devicePath != "" {
			kubelet.SetPod(benchNamespace, podName, map[string]podresourcestest.Container{"main": {resource: {r.card.ID}}})
		}
		if err := r.runSandbox(ctx, a, podName); err != nil {
			return err
		}
		r.arms[a.name] = a
	}
	defer r.removeSandboxes()

	if err := r.measure(ctx, b.cfg); err != nil {
		return err
	}
	var errs []error
	if burst, err := r.measureBurst(ctx, b.cfg); err != nil {
		errs = append(errs, fmt.Errorf("burst: %w", err))
	} else {
		errs = append(errs,
			b.setRatio("nri_burst_plain_ratio", burst.plainOn, burst.plainOff, fmt.Sprintf(
				"plain container created at the same moment as %d GPU containers (nri delivery), dri-cdi-nri connected vs not; interleaved blocks", burstGPU)),
			b.setRatio("nri_burst_gpu_ratio", burst.gpuOn, burst.gpuOff, fmt.Sprintf(
				"the %d GPU containers of those bursts: injected by dri-cdi-nri vs annotation only without it (no device)", burstGPU)))
	}
	for _, k := range []struct{ key, a, b, note string }{
		{"nri_create_ratio", armPlainOn, armPlainOff,
			"CRI CreateContainer+StartContainer of a plain busybox container, dri-cdi-nri connected vs not; interleaved blocks"},
		{"nri_cdi_vs_nri_ratio", armCDIOn, armNRI,
			"GPU container (1 card): CDI name injected by containerd's CDI, dri-cdi-nri verifying, vs allocation annotation only, nodes injected by dri-cdi-nri; interleaved"},
		{"nri_verify_cdi_ratio", armCDIOn, armCDIOff,
			"CDI-injected GPU container with dri-cdi-nri connected (it confirms the allocation with PodResources) vs not"},
		{"nri_inject_ratio", armNRI, armNRIOff,
			"nri-delivery GPU container: dri-cdi-nri injecting its device vs the same container without the plugin (no device)"},
	} {
		errs = append(errs, b.setRatio(k.key, r.arms[k.a], r.arms[k.b], k.note))
	}
	pid := node.NRIPid()
	if pid == 0 {
		return errors.Join(append(errs, errors.New("dri-cdi-nri is not running after the container runs"))...)
	}
	rss, err := steadyRSS(pid)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, b.setRSS("nri_rss_mb", rss, fmt.Sprintf(
		"dri-cdi-nri connected to containerd, specs of 16 cards loaded, after %d containers", r.created)))
	return errors.Join(errs...)
}

// setRatio records the ratio of the medians of two arms, with both arms'
// samples in ms.
func (b *bench) setRatio(key string, num, den *arm, note string) error {
	na, nd := In(time.Millisecond, num.times), In(time.Millisecond, den.times)
	c, err := Compare(na, nd)
	if err != nil {
		return fmt.Errorf("%s (%s over %s): %w", key, num.name, den.name, err)
	}
	a, d, ratio, lo, hi := c.Num, c.Den, c.Ratio, c.CI95[0], c.CI95[1]
	b.report.Set(key, Result{Value: ratio, Unit: "ratio", Stat: "median ratio", Note: note,
		Parts:   map[string]Summary{num.name + " (ms)": a, den.name + " (ms)": d},
		CI95:    &[2]float64{round(lo, 4), round(hi, 4)},
		Samples: map[string][]float64{num.name + " (ms)": roundAll(na), den.name + " (ms)": roundAll(nd)}})
	b.report.Params.Repetitions[key] = min(a.N, d.N)
	logf("%s = %.4f [95%% CI %.3f-%.3f] (%s: median %.2f ms, p99 %.2f ms, n %d; %s: median %.2f ms, p99 %.2f ms, n %d)",
		key, ratio, lo, hi, num.name, a.Median, a.P99, a.N, den.name, d.Median, d.P99, d.N)
	return nil
}

func (b *bench) recordVersions(ctx context.Context, rt runtimeapi.RuntimeServiceClient, suite *harness.Suite) {
	v := b.report.Params.Versions
	if resp, err := rt.Version(ctx, &runtimeapi.VersionRequest{}); err == nil {
		v["runtime"] = resp.GetRuntimeName() + " " + resp.GetRuntimeVersion()
		v["cri"] = resp.GetRuntimeApiVersion()
	}
	if out, err := exec.Command(suite.Tools.Runc, "--version").Output(); err == nil {
		v["runc"] = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	if suite.OOMClamp {
		b.report.Params.Notes = append(b.report.Params.Notes,
			"runc ran behind the harness's oom_score_adj clamp wrapper (this host refuses negative values), in every arm")
	}
}

// writeSpecs writes the CDI specs of the node's cards into the directory
// containerd and dri-cdi-nri read, as the agent would.
func (r *crirun) writeSpecs() error {
	inv, err := discoverN(r.node.Tree.Roots(), 16)
	if err != nil {
		return err
	}
	w, err := cdi.NewWriter(r.node.CDIDir, cdi.DefaultKind)
	if err != nil {
		return err
	}
	if _, err := w.Sync(inv.Cards); err != nil {
		return err
	}
	r.card = inv.Cards[0]
	if r.card.RenderNode == nil {
		return fmt.Errorf("card %s has no render node", r.card.ID)
	}
	return nil
}

func (r *crirun) runSandbox(ctx context.Context, a *arm, name string) error {
	a.pod = &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: benchNamespace, Uid: "uid-" + name},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			// Below the node's cgroup root, so teardown finds every process.
			CgroupParent: "/" + r.node.CgroupRoot() + "/bench",
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	resp, err := r.rt.RunPodSandbox(cctx, &runtimeapi.RunPodSandboxRequest{Config: a.pod})
	if err != nil {
		return fmt.Errorf("run pod sandbox %s: %w", name, err)
	}
	a.sandbox = resp.GetPodSandboxId()
	return nil
}

func (r *crirun) removeSandboxes() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, a := range r.arms {
		if a.sandbox == "" {
			continue
		}
		_, _ = r.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: a.sandbox})
		_, _ = r.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: a.sandbox})
	}
}

// measure runs the arms in blocks: with dri-cdi-nri connected, the plain,
// CDI and NRI arms; disconnected, the plain, CDI and annotation-only
// arms. Blocks follow
// an ABBA order and the arms rotate within a block, so drift in the
// machine's load falls on every arm alike.
func (r *crirun) measure(ctx context.Context, cfg Config) error {
	blocks := (cfg.Containers + cfg.Block - 1) / cfg.Block
	setNRI := func(on bool) error { return r.setNRI(ctx, on) }
	// Warm up every arm: the first containers pay for snapshots and caches.
	for _, on := range []bool{true, false} {
		if err := setNRI(on); err != nil {
			return err
		}
		for _, a := range r.armsOf(on) {
			for range 5 {
				if _, err := r.once(ctx, a); err != nil {
					return err
				}
			}
		}
	}
	start := time.Now()
	for bi := range 2 * blocks {
		on := abbaA(bi)
		toggled := on != r.connected
		if err := setNRI(on); err != nil {
			return err
		}
		arms := r.armsOf(on)
		if toggled {
			// A freshly started plugin dials PodResources on its first
			// GPU container; a long-running one has that connection.
			for _, a := range arms {
				if _, err := r.once(ctx, a); err != nil {
					return err
				}
			}
		}
		for i := range cfg.Block {
			for j := range arms {
				a := arms[(i+j)%len(arms)]
				d, err := r.once(ctx, a)
				if err != nil {
					return err
				}
				a.times = append(a.times, d)
			}
		}
		logf("containers: block %d/%d (dri-cdi-nri %s) done, %d containers in %v", bi+1, 2*blocks,
			map[bool]string{true: "connected", false: "disconnected"}[on], r.created, time.Since(start).Round(time.Second))
	}
	// End connected, for the plugin's memory after the load.
	return setNRI(true)
}

// setNRI connects or disconnects dri-cdi-nri.
func (r *crirun) setNRI(ctx context.Context, on bool) error {
	if on == r.connected {
		return nil
	}
	r.connected = on
	if on {
		return r.node.StartNRI(ctx)
	}
	r.node.StopNRI()
	if r.node.NRIPid() != 0 {
		return errors.New("dri-cdi-nri still running after stop")
	}
	return nil
}

func (r *crirun) armsOf(connected bool) []*arm {
	if connected {
		return []*arm{r.arms[armPlainOn], r.arms[armCDIOn], r.arms[armNRI]}
	}
	return []*arm{r.arms[armPlainOff], r.arms[armCDIOff], r.arms[armNRIOff]}
}

// once creates and starts one container of an arm and returns how long
// CreateContainer + StartContainer took. Then, untimed, it checks the
// container's OCI spec for the arm's device node and removes it.
func (r *crirun) once(ctx context.Context, a *arm) (time.Duration, error) {
	a.attempt++
	id, d, err := r.start(ctx, a, a.attempt)
	r.created++
	if err := r.finish(ctx, a, id, err); err != nil {
		return 0, err
	}
	time.Sleep(settle)
	return d, nil
}

// start creates and starts container attempt of an arm and returns its
// ID and how long CreateContainer + StartContainer took.
func (r *crirun) start(ctx context.Context, a *arm, attempt uint32) (string, time.Duration, error) {
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: "main", Attempt: attempt},
		Image:       &runtimeapi.ImageSpec{Image: harness.BusyboxImage},
		Command:     []string{"/bin/sleep", "3600"},
		Annotations: a.annotations,
		Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				RunAsUser:        &runtimeapi.Int64Value{Value: 1000},
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
			},
		},
	}
	if a.cdi != "" {
		cfg.CDIDevices = []*runtimeapi.CDIDevice{{Name: a.cdi}}
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	cr, err := r.rt.CreateContainer(cctx, &runtimeapi.CreateContainerRequest{PodSandboxId: a.sandbox, Config: cfg, SandboxConfig: a.pod})
	if err != nil {
		return "", 0, fmt.Errorf("%s: create container: %w", a.name, err)
	}
	id := cr.GetContainerId()
	_, err = r.rt.StartContainer(cctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	d := time.Since(start)
	if err != nil {
		err = fmt.Errorf("%s: start container: %w", a.name, err)
	}
	return id, d, err
}

// finish checks a started container's OCI spec for the arm's device node
// (unless starting it failed with startErr) and removes it.
func (r *crirun) finish(ctx context.Context, a *arm, id string, startErr error) error {
	if id == "" {
		return startErr
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := startErr
	if err == nil {
		err = r.checkDevices(cctx, a, id)
	}
	_, serr := r.rt.StopContainer(cctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0})
	_, rerr := r.rt.RemoveContainer(cctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	return errors.Join(err, serr, rerr)
}

// ociSpec is the part of the runtime spec checked.
type ociSpec struct {
	Linux struct {
		Devices []struct {
			Path  string `json:"path"`
			Major int64  `json:"major"`
			Minor int64  `json:"minor"`
		} `json:"devices"`
		Resources struct {
			Devices []struct {
				Allow  bool   `json:"allow"`
				Type   string `json:"type"`
				Major  *int64 `json:"major"`
				Minor  *int64 `json:"minor"`
				Access string `json:"access"`
			} `json:"devices"`
		} `json:"resources"`
	} `json:"linux"`
}

// checkDevices makes sure the container got exactly what its arm is
// about: the card's render node once, with an allow rule, or no DRM node
// at all. A run whose GPU containers got no device would compare nothing.
func (r *crirun) checkDevices(ctx context.Context, a *arm, id string) error {
	st, err := r.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		return fmt.Errorf("%s: container status: %w", a.name, err)
	}
	var info struct {
		RuntimeSpec ociSpec `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil {
		return fmt.Errorf("%s: parse container info: %w", a.name, err)
	}
	spec := info.RuntimeSpec
	var dri []string
	var major, minor int64
	for _, d := range spec.Linux.Devices {
		if strings.HasPrefix(d.Path, "/dev/dri/") {
			dri = append(dri, d.Path)
			if d.Path == a.devicePath {
				major, minor = d.Major, d.Minor
			}
		}
	}
	if a.devicePath == "" {
		if len(dri) > 0 {
			return fmt.Errorf("%s: plain container got DRM nodes %v", a.name, dri)
		}
		return nil
	}
	count := 0
	for _, p := range dri {
		if p == a.devicePath {
			count++
		}
	}
	if count != 1 {
		return fmt.Errorf("%s: container has %s %d times in linux.devices (DRM nodes %v), want once", a.name, a.devicePath, count, dri)
	}
	for _, rule := range spec.Linux.Resources.Devices {
		if rule.Allow && rule.Type == "c" && rule.Major != nil && *rule.Major == major && rule.Minor != nil && *rule.Minor == minor {
			return nil
		}
	}
	return fmt.Errorf("%s: no cgroup allow rule for %s (c %d:%d)", a.name, a.devicePath, major, minor)
}

// kubeletPodResourcesInterval paces queries to a real kubelet.
const kubeletPodResourcesInterval = 15 * time.Millisecond

// measureKubeletPodResources times the same query as podresources_p99_us
// against the node's real kubelet, for a running static pod, before the
// kubelet is stopped. The figure is informational: the container
// comparisons use the fake server, and podresources_p99_us stays
// measurable without a kubelet.
func (b *bench) measureKubeletPodResources(ctx context.Context, node *harness.Node) error {
	pod := harness.PodSpec{Name: "bench-podresources", Script: "sleep 3600"}
	if err := node.CreatePod(ctx, pod); err != nil {
		return err
	}
	if _, err := node.WaitPod(ctx, pod.Name, 3*time.Minute, func(st harness.PodStatus) bool {
		return len(st.Containers) > 0 && st.Containers[0].State.Running != nil
	}); err != nil {
		return err
	}
	c, err := podresources.New(node.PodResourcesSocket)
	if err != nil {
		return err
	}
	defer c.Close()
	// The kubelet rate-limits the PodResources API (100 queries/s, burst
	// 10): pace the queries below that.
	calls := b.cfg.kubeletPodResourcesCalls
	ds := make([]time.Duration, 0, calls)
	tick := time.NewTicker(kubeletPodResourcesInterval)
	defer tick.Stop()
	runtime.GC()
	for i := range calls + calls/10 {
		<-tick.C
		cctx, cancel := context.WithTimeout(ctx, podresources.DefaultTimeout)
		start := time.Now()
		got, err := c.ContainerDevices(cctx, "default", pod.FullName(), harness.ContainerName)
		d := time.Since(start)
		cancel()
		if err != nil {
			return fmt.Errorf("PodResources for %s: %w", pod.FullName(), err)
		}
		if len(got) != 0 {
			return fmt.Errorf("PodResources for %s: devices %v, want none", pod.FullName(), got)
		}
		if i >= calls/10 {
			ds = append(ds, d)
		}
	}
	if err := b.setSample("podresources_kubelet_p99_us", time.Microsecond, ds, "p99",
		fmt.Sprintf("the podresources_p99_us query (Get) against the real kubelet of the container-path node, for a running static pod, one query every %v (the kubelet rate-limits this API)", kubeletPodResourcesInterval)); err != nil {
		return err
	}
	return node.DeletePod(ctx, pod.Name)
}

// roundAll rounds milliseconds to microseconds, for the JSON file.
func roundAll(ms []float64) []float64 {
	out := make([]float64, len(ms))
	for i, v := range ms {
		out[i] = math.Round(v*1000) / 1000
	}
	return out
}
