package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/usage"
	"github.com/dri-cdi/dri-cdi/pkg/usage/usagetest"
)

// usageInterval is the agent's --usage-interval in this scenario.
const usageInterval = time.Second

// TestClusterUsage deploys dri-cdi with the usage component on a real
// cluster and checks per-container GPU usage against real pods. The
// kernel writes DRM fdinfo only for a real driver, which these machines
// lack, so the agent reads a proc tree the test builds: the real PIDs of
// the real pods' containers with their real cgroup and comm files,
// copied from /proc, and only the fd links (to the fake GPU's render
// node) and the fdinfo texts synthetic. The names come from containerd's
// real bundles, as on a node.
func TestClusterUsage(t *testing.T) {
	ctx := context.Background()
	c, gpu, proc, bundles, render := startUsageCluster(t, "usage")

	requireStep(t, "DeployWithUsageComponent", func(t *testing.T) {
		base, err := c.WriteOverlay(filepath.Join(c.Dir, "overlay"), harness.OverlayOptions{})
		require.NoError(t, err)
		overlay := writeUsageOverlay(t, c, base, driCDIDaemonSet, "agent", proc.Root, bundles)
		kubectl(t, c, "apply", "-k", overlay)
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, driCDIDaemonSet, 3*time.Minute))
		require.NoError(t, c.WaitAllocatable(ctx, resource, 1, 60*time.Second))
	})

	var mediaPID, plainPID int
	var media *harness.Pod
	requireStep(t, "PodsRun", func(t *testing.T) {
		apply(t, c, harness.MediaServer("media", resource, 1))
		pod, rep := mediaServer(t, c, "media")
		requireMediaServerOpens(t, rep)
		media = pod
		apply(t, c, plainPod("plain"))
		plain, err := c.WaitPod(ctx, "default", "app=plain", 2*time.Minute, func(p *harness.Pod) bool {
			return p.Status.Phase == "Running" && p.ContainerID("app") != ""
		})
		require.NoError(t, err)
		mediaPID = containerPID(t, bundles, media.ContainerID("server"))
		plainPID = containerPID(t, bundles, plain.ContainerID("app"))
		// The real processes with their real cgroup and comm; the
		// media server holds two clients of the card (a server and a
		// transcode), the plain pod only files that are no GPU.
		mirrorProcess(t, proc, mediaPID)
		mirrorProcess(t, proc, plainPID)
		require.NoError(t, proc.SetFD(mediaPID, 10, render, fdinfo(1, 2e9, 3<<10)))
		require.NoError(t, proc.SetFD(mediaPID, 11, render, fdinfo(2, 5e9, 1<<10)))
		require.NoError(t, proc.SetFD(plainPID, 3, "/dev/null", "pos:\t0\nflags:\t0100002\n"))
	})

	agent := func(t *testing.T) *harness.Pod { return mustOnePod(t, c, driCDINamespace, driCDIPods) }
	busy := func(t *testing.T) (map[string]float64, map[string]float64) {
		return usageSeries(t, c, agent(t).Metadata.Name, "dri_cdi_usage_engine_busy_seconds_total", "engine"),
			usageSeries(t, c, agent(t).Metadata.Name, "dri_cdi_usage_clients", "")
	}
	who := fmt.Sprintf("%s/default/%s/server", gpu.ID(), media.Metadata.Name)

	t.Run("MetricsNameTheContainer", func(t *testing.T) {
		require.Eventually(t, func() bool {
			b, cl := busy(t)
			return b[who+"/video"] == 7 && cl[who] == 2
		}, 30*time.Second, usageInterval/2, "7s of video over two clients for %s", who)
		b, cl := busy(t)
		for k := range b {
			require.True(t, strings.HasPrefix(k, who+"/"), "only the media server uses the GPU; got %s", k)
		}
		require.Len(t, cl, 1, "a pod without a GPU shows nothing: %v", cl)
	})

	t.Run("TopShowsTheSame", func(t *testing.T) {
		id := agent(t).ContainerID("agent")
		out, err := c.Node.Exec(ctx, id, "/usr/bin/dri-cdi", "top", "--once", "-o", "json", "--interval", "1s",
			"--proc-root", "/host/proc", "--bundle-dir", usage.DefaultBundleDir,
			"--sysfs-root", c.Node.SysfsRoot, "--dev-root", c.Node.DevRoot)
		require.NoError(t, err, out)
		var snap usage.Snapshot
		require.NoError(t, json.NewDecoder(strings.NewReader(out[strings.Index(out, "{"):])).Decode(&snap), out)
		require.Len(t, snap.Cards, 1, out)
		card := snap.Cards[0]
		require.Equal(t, gpu.ID(), card.ID)
		require.Len(t, card.Users, 1, "a pod without a GPU shows nothing")
		u := card.Users[0]
		require.Equal(t, usage.Names{Namespace: "default", Pod: media.Metadata.Name, Container: "server"}, u.Names)
		require.Equal(t, media.Metadata.UID, u.PodUID)
		require.Equal(t, 2, u.Clients)
		require.Len(t, u.Processes, 1)
		require.Equal(t, mediaPID, u.Processes[0].PID)
		comm, err := os.ReadFile(filepath.Join(proc.Root, strconv.Itoa(mediaPID), "comm"))
		require.NoError(t, err)
		require.Equal(t, strings.TrimSpace(string(comm)), u.Processes[0].Comm, "the comm copied from /proc")
		var video float64
		for _, e := range u.Engines {
			if e.Class == usage.ClassVideo {
				video = e.BusySeconds
			}
		}
		require.InDelta(t, 7.0, video, 1e-9)
	})

	t.Run("TopThroughAPIServer", func(t *testing.T) {
		// Where no pod may have the host's /proc: dri-cdi top on the
		// operator's machine reads the agent's metrics through kubectl
		// proxy and the API server's pod proxy.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := l.Addr().(*net.TCPAddr).Port
		require.NoError(t, l.Close())
		proxy := exec.Command(c.Tools.Kubectl, "--kubeconfig", c.Kubeconfig, "proxy", "--port", strconv.Itoa(port))
		require.NoError(t, proxy.Start())
		defer func() { _ = proxy.Process.Kill(); _ = proxy.Wait() }()
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		require.Eventually(t, func() bool {
			resp, err := http.Get(base + "/version")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil && resp.StatusCode == http.StatusOK
		}, 30*time.Second, 100*time.Millisecond)
		url := fmt.Sprintf("%s/api/v1/namespaces/%s/pods/%s:9470/proxy/metrics", base, driCDINamespace, agent(t).Metadata.Name)
		out, err := exec.Command(suite.Product.CLI, "top", "--once", "-o", "json", "--interval", "2500ms", "--metrics-url", url).CombinedOutput()
		require.NoError(t, err, string(out))
		var snap usage.Snapshot
		require.NoError(t, json.Unmarshal(out, &snap), string(out))
		require.Len(t, snap.Cards, 1)
		require.Equal(t, gpu.ID(), snap.Cards[0].ID)
		require.Len(t, snap.Cards[0].Users, 1)
		u := snap.Cards[0].Users[0]
		require.Equal(t, usage.Names{Namespace: "default", Pod: media.Metadata.Name, Container: "server"}, u.Names)
		require.Equal(t, 2, u.Clients)
		require.Len(t, u.Engines, 2)
		require.Equal(t, usage.EngineUsage{Class: usage.ClassVideo, BusySeconds: 7, Busy: 0, HasBusy: true}, u.Engines[1],
			"7s of video, none of it in the last %s", snap.Interval)
	})

	t.Run("ExitedClientKeepsItsTime", func(t *testing.T) {
		// The transcode ends: its client closes. The counter keeps its
		// 5s; the running client adds 1s more.
		require.NoError(t, proc.CloseFD(mediaPID, 11))
		require.NoError(t, proc.SetFD(mediaPID, 10, render, fdinfo(1, 3e9, 3<<10)))
		require.Eventually(t, func() bool {
			b, cl := busy(t)
			return cl[who] == 1 && b[who+"/video"] == 8
		}, 30*time.Second, usageInterval/2)
		// Several scans later it still has not decreased.
		time.Sleep(5 * usageInterval)
		b, _ := busy(t)
		require.Equal(t, 8.0, b[who+"/video"])
	})

	t.Run("DeletedPodsSeriesGo", func(t *testing.T) {
		kubectl(t, c, "delete", "deployment", "media", "--wait=true")
		waitNoPods(t, c, "default", "app=media", 2*time.Minute)
		// Its process is gone from the real /proc; the tree follows.
		require.Eventually(t, func() bool { _, err := os.Stat(fmt.Sprintf("/proc/%d", mediaPID)); return os.IsNotExist(err) }, 30*time.Second, 100*time.Millisecond)
		require.NoError(t, proc.Exit(mediaPID))
		require.Eventually(t, func() bool {
			b, cl := busy(t)
			return len(b) == 0 && len(cl) == 0
		}, 30*time.Second, usageInterval/2, "the deleted pod's series must go")
	})
}

// TestClusterUsageDeviceSpecs checks usage on a node without the NRI
// plugin: the device-specs delivery of overlays/device-specs (the kubelet
// hands the runtime the device nodes; the DaemonSet has no NRI
// container) with the usage component. The names come from containerd's
// bundles, not from the NRI plugin, so a media server that got its card
// this way shows under its namespace, pod and container as in
// TestClusterUsage.
func TestClusterUsageDeviceSpecs(t *testing.T) {
	ctx := context.Background()
	c, gpu, proc, bundles, render := startUsageCluster(t, "usage-devspecs")

	requireStep(t, "DeployDeviceSpecsWithUsage", func(t *testing.T) {
		base, err := c.WriteOverlay(filepath.Join(c.Dir, "overlay"), harness.OverlayOptions{})
		require.NoError(t, err)
		overlay := writeUsageOverlay(t, c, writeDeviceSpecsOverlay(t, c, base), driCDIDaemonSet, "agent", proc.Root, bundles)
		kubectl(t, c, "apply", "-k", overlay)
		require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, driCDIDaemonSet, 3*time.Minute))
		require.NoError(t, c.WaitAllocatable(ctx, resource, 1, 60*time.Second))
		agent := mustOnePod(t, c, driCDINamespace, driCDIPods)
		require.Len(t, agent.Spec.Containers, 1, "no NRI plugin next to the agent")
		require.Equal(t, "agent", agent.Spec.Containers[0].Name)
	})

	var media *harness.Pod
	requireStep(t, "MediaServerRuns", func(t *testing.T) {
		apply(t, c, harness.MediaServer("media", resource, 1))
		pod, rep := mediaServer(t, c, "media")
		requireMediaServerOpens(t, rep)
		media = pod
		pid := containerPID(t, bundles, media.ContainerID("server"))
		mirrorProcess(t, proc, pid)
		require.NoError(t, proc.SetFD(pid, 10, render, fdinfo(1, 3e9, 1<<10)))
	})

	t.Run("MetricsNameTheContainer", func(t *testing.T) {
		agent := mustOnePod(t, c, driCDINamespace, driCDIPods).Metadata.Name
		who := fmt.Sprintf("%s/default/%s/server", gpu.ID(), media.Metadata.Name)
		require.Eventually(t, func() bool {
			return usageSeries(t, c, agent, "dri_cdi_usage_engine_busy_seconds_total", "engine")[who+"/video"] == 3 &&
				usageSeries(t, c, agent, "dri_cdi_usage_clients", "")[who] == 1
		}, 30*time.Second, usageInterval/2, "3s of video over one client for %s", who)
		require.Len(t, usageSeries(t, c, agent, "dri_cdi_usage_clients", ""), 1)
	})
}

// componentOverlay makes the directory name under the cluster's and
// returns it with the start of its kustomization: base (a directory) as
// its resource and the repository's kustomize component as its component.
func componentOverlay(t *testing.T, c *harness.Cluster, name, base, component string) (dir, kustomization string) {
	t.Helper()
	root, err := harness.RepoRoot()
	require.NoError(t, err)
	dir = filepath.Join(c.Dir, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	relBase, err := filepath.Rel(dir, base)
	require.NoError(t, err)
	relComponent, err := filepath.Rel(dir, filepath.Join(root, "deployments", "kustomize", "components", component))
	require.NoError(t, err)
	return dir, fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\ncomponents:\n- %s\n", relBase, relComponent)
}

// writeDeviceSpecsOverlay layers overlays/device-specs's changes over the
// e2e overlay base: the without-nri component and --delivery=device-specs.
func writeDeviceSpecsOverlay(t *testing.T, c *harness.Cluster, base string) string {
	t.Helper()
	out, k := componentOverlay(t, c, "overlay-device-specs", base, "without-nri")
	k += `patches:
- target:
    kind: DaemonSet
    name: dri-cdi
  patch: |-
    - {op: test, path: /spec/template/spec/containers/0/args/1, value: --delivery=cdi-cri}
    - {op: replace, path: /spec/template/spec/containers/0/args/1, value: --delivery=device-specs}
`
	require.NoError(t, os.WriteFile(filepath.Join(out, "kustomization.yaml"), []byte(k), 0o644))
	return out
}

// TestClusterDRAUsage checks usage on a DRA node: the usage component on
// the DRA overlay makes dri-cdi-dra scan, and a pod that holds the card
// through a ResourceClaim (no device plugin on the node) shows in its
// metrics under its namespace, pod and container, as in TestClusterUsage
// (the same proc tree of the real container's PID, cgroup and comm, with
// a synthetic fd link and fdinfo), until the pod is deleted.
func TestClusterDRAUsage(t *testing.T) {
	ctx := context.Background()
	c, gpu, proc, bundles, render := startUsageCluster(t, "dra-usage")

	requireStep(t, "DRANodeWithUsageComponent", func(t *testing.T) {
		deployDRAUsage(t, c, harness.OverlayOptions{}, proc, bundles)
		pods, err := c.Pods(ctx, driCDINamespace, driCDIPods)
		require.NoError(t, err)
		require.Empty(t, pods, "no device-plugin pod on the DRA node")
		waitSlice(t, c, 1)
	})

	const name = "claimed"
	requireStep(t, "ClaimPodHoldsTheCard", func(t *testing.T) {
		apply(t, c, harness.ResourceClaimTemplate("intel", harness.DRAClass, ""))
		apply(t, c, harness.ClaimPod(name, harness.ClaimRef{Template: "intel"}, harness.RenderPath(gpu)))
		res := claimPodProbes(t, c, name, harness.RenderPath(gpu))
		require.Equal(t, harness.ENXIO, res[harness.RenderPath(gpu)].Errno, res[harness.RenderPath(gpu)].Message)
		pod := mustOnePod(t, c, "default", "app="+name)
		pid := containerPID(t, bundles, pod.ContainerID("app"))
		mirrorProcess(t, proc, pid)
		require.NoError(t, proc.SetFD(pid, 10, render, fdinfo(1, 4e9, 2<<10)))
	})

	who := fmt.Sprintf("%s/default/%s/app", gpu.ID(), name)
	series := func(t *testing.T, metric, extra string) map[string]float64 {
		return seriesOf(t, loopbackMetrics(t, c, draMetricsPort), metric, extra)
	}
	t.Run("DRAPluginMetricsNameTheContainer", func(t *testing.T) {
		require.Eventually(t, func() bool {
			return series(t, "dri_cdi_usage_engine_busy_seconds_total", "engine")[who+"/video"] == 4 &&
				series(t, "dri_cdi_usage_clients", "")[who] == 1
		}, 30*time.Second, usageInterval/2, "4s of video over one client for %s in dri-cdi-dra's metrics", who)
		for k := range series(t, "dri_cdi_usage_engine_busy_seconds_total", "engine") {
			require.True(t, strings.HasPrefix(k, who+"/"), "only the claim's pod uses the GPU; got %s", k)
		}
		require.Equal(t, float64(2<<20), series(t, "dri_cdi_usage_memory_bytes", "kind")[who+"/resident"])
	})

	t.Run("DeletedPodsSeriesGo", func(t *testing.T) {
		require.NotEmpty(t, series(t, "dri_cdi_usage_clients", ""), "the pod's series before it is deleted")
		pid := containerPID(t, bundles, mustOnePod(t, c, "default", "app="+name).ContainerID("app"))
		kubectl(t, c, "delete", "pod", name, "--wait=true")
		require.Eventually(t, func() bool { _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); return os.IsNotExist(err) }, 30*time.Second, 100*time.Millisecond)
		require.NoError(t, proc.Exit(pid))
		require.Eventually(t, func() bool {
			return len(series(t, "dri_cdi_usage_engine_busy_seconds_total", "engine")) == 0 &&
				len(series(t, "dri_cdi_usage_clients", "")) == 0
		}, 30*time.Second, usageInterval/2, "the deleted pod's series must go")
	})
}

// deployDRAUsage deploys the DRA overlay (with opts) and the usage
// component over it, scanning proc with the node's bundles, and waits
// until dri-cdi-dra is ready.
func deployDRAUsage(t *testing.T, c *harness.Cluster, opts harness.OverlayOptions, proc *usagetest.Proc, bundles string) {
	t.Helper()
	applyDRAOverlayVia(t, c, opts, func(base string) string {
		return writeUsageOverlay(t, c, base, draDaemonSet, "dra", proc.Root, bundles)
	})
}

// startUsageCluster starts a one-card cluster for a usage scenario and
// returns it with its card, the proc tree the scanning daemon is to read,
// the node's containerd bundle dir and the card's render node on the host.
func startUsageCluster(t *testing.T, name string) (c *harness.Cluster, gpu drmtest.GPU, proc *usagetest.Proc, bundles, render string) {
	t.Helper()
	gpu = harness.IntelGPU(0)
	c = startCluster(t, harness.ClusterOptions{Name: name, GPUs: []drmtest.GPU{gpu}})
	proc, err := usagetest.New(filepath.Join(c.Dir, "usage-proc"))
	require.NoError(t, err)
	bundles = filepath.Join(c.Node.Dir, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io")
	render = filepath.Join(c.Node.DevRoot, "dri", fmt.Sprintf("renderD%d", gpu.Render))
	return c, gpu, proc, bundles, render
}

// writeUsageOverlay layers the usage component over an e2e overlay
// (base), with the host paths of the DaemonSet that scans on the node
// (daemonSet, its container scanner first) pointed at the test's proc tree
// and the node's private containerd bundle dir, and a short scan
// interval. The patch finds its places in a first rendering, and its
// "test" operations fail the build if they move.
func writeUsageOverlay(t *testing.T, c *harness.Cluster, base, daemonSet, scanner, procRoot, bundles string) string {
	t.Helper()
	out, k := componentOverlay(t, c, "overlay-usage", base, "usage")
	write := func() { require.NoError(t, os.WriteFile(filepath.Join(out, "kustomization.yaml"), []byte(k), 0o644)) }
	write()
	rendered, err := c.Kustomize(context.Background(), out)
	require.NoError(t, err)
	type daemonSetDoc struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name string   `json:"name"`
						Args []string `json:"args"`
					} `json:"containers"`
					Volumes []struct {
						Name string `json:"name"`
					} `json:"volumes"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	var ds daemonSetDoc
	for _, doc := range strings.Split(rendered, "\n---\n") {
		var d daemonSetDoc
		require.NoError(t, yaml.Unmarshal([]byte(doc), &d))
		if d.Kind == "DaemonSet" && d.Metadata.Name == daemonSet {
			ds = d
		}
	}
	spec := ds.Spec.Template.Spec
	require.NotEmpty(t, spec.Containers, "no DaemonSet %s in the rendering", daemonSet)
	require.Equal(t, scanner, spec.Containers[0].Name)
	index := func(names []string, match func(string) bool) int {
		for i, n := range names {
			if match(n) {
				return i
			}
		}
		t.Fatalf("nothing matches in %v", names)
		return 0
	}
	var vols []string
	for _, v := range spec.Volumes {
		vols = append(vols, v.Name)
	}
	procVol := index(vols, func(n string) bool { return n == "host-proc" })
	bundleVol := index(vols, func(n string) bool { return n == "runtime-bundles" })
	intervalArg := index(spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--usage-interval=") })
	k += fmt.Sprintf(`patches:
- target:
    kind: DaemonSet
    name: %[8]s
  patch: |-
    - {op: test, path: /spec/template/spec/volumes/%[1]d/name, value: host-proc}
    - {op: replace, path: /spec/template/spec/volumes/%[1]d/hostPath/path, value: %[2]q}
    - {op: test, path: /spec/template/spec/volumes/%[3]d/name, value: runtime-bundles}
    - {op: replace, path: /spec/template/spec/volumes/%[3]d/hostPath/path, value: %[4]q}
    - {op: test, path: /spec/template/spec/containers/0/args/%[5]d, value: %[6]q}
    - {op: replace, path: /spec/template/spec/containers/0/args/%[5]d, value: "--usage-interval=%[7]s"}
`, procVol, procRoot, bundleVol, bundles, intervalArg, spec.Containers[0].Args[intervalArg], usageInterval, daemonSet)
	write()
	return out
}

// plainPod is a pod without a GPU.
func plainPod(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %[1]s, namespace: default, labels: {app: %[1]s}}
spec:
  automountServiceAccountToken: false
  enableServiceLinks: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %[2]s
    imagePullPolicy: Never
    command: [/bin/sh, -c, "exec sleep 3600"]
`, name, harness.BusyboxImage)
}

// containerPID reads the PID of a running container's init process from
// its bundle (the runc shim writes init.pid there).
func containerPID(t *testing.T, bundles, id string) int {
	t.Helper()
	require.NotEmpty(t, id)
	raw, err := os.ReadFile(filepath.Join(bundles, id, "init.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	return pid
}

func realComm(t *testing.T, pid int) string {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	require.NoError(t, err)
	return strings.TrimSpace(string(raw))
}

// mirrorProcess creates pid in the tree with the real process's cgroup
// and comm.
func mirrorProcess(t *testing.T, proc *usagetest.Proc, pid int) {
	t.Helper()
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	require.NoError(t, err)
	require.Contains(t, string(cg), "kubepods", "a pod's process runs in the kubelet's cgroups")
	require.NoError(t, proc.AddProcess(pid, realComm(t, pid), string(cg)))
}

// fdinfo is an i915 client's fdinfo with videoNS of video engine time and
// residentKiB of system memory.
func fdinfo(client, videoNS, residentKiB uint64) string {
	return usagetest.FDInfo{Driver: "i915", PDev: "0000:00:02.0", ClientID: client,
		Engines: map[string]uint64{"render": 0, "video": videoNS},
		Memory:  map[string]uint64{"resident-system0": residentKiB, "total-system0": residentKiB}}.String()
}

// usageSeries scrapes the agent through the API server's pod proxy and
// returns the values of one usage metric keyed
// "<card>/<namespace>/<pod>/<container>[/<extra label>]".
func usageSeries(t *testing.T, c *harness.Cluster, agentPod, name, extra string) map[string]float64 {
	t.Helper()
	body := kubectl(t, c, "get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:9470/proxy/metrics", driCDINamespace, agentPod))
	return seriesOf(t, body, name, extra)
}

// seriesOf is usageSeries of a /metrics answer.
func seriesOf(t *testing.T, body, name, extra string) map[string]float64 {
	t.Helper()
	m, err := harness.ParseMetrics(body)
	require.NoError(t, err)
	out := map[string]float64{}
	for _, sm := range m.Samples(name) {
		l := sm.Labels
		key := strings.Join([]string{l["card"], l["namespace"], l["pod"], l["container"]}, "/")
		if extra != "" {
			key += "/" + l[extra]
		}
		out[key] = sm.Value
	}
	return out
}
