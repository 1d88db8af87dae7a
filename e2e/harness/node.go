package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// NodeName is the kubelet's --hostname-override; static pod names end in
// "-" + NodeName.
const NodeName = "dri-cdi-e2e"

// NodeOptions describe one node.
type NodeOptions struct {
	// Name is a short label for the node's directory (letters, digits, -).
	Name string
	// GPUs are the fake DRM devices in the node's tree at start.
	GPUs []drmtest.GPU
	// HideCDIFromRuntime points containerd's cdi_spec_dirs at an empty
	// directory instead of the directory the agent writes, like a runtime
	// whose CDI cannot resolve our names.
	HideCDIFromRuntime bool
	// Delivery starts dri-cdi-agent in this mode; "" starts no agent.
	Delivery string
	// NRI starts dri-cdi-nri.
	NRI bool
	// Config is the YAML configuration given to the agent and the NRI
	// plugin; "" gives them none (defaults).
	Config string
	// AgentArgs and NRIArgs are extra flags.
	AgentArgs []string
	NRIArgs   []string
	// Containerd is the containerd release to run (Containerd22,
	// Containerd17); "" runs the default build. See containerd.go.
	Containerd string
	// SpecDirSize puts the CDI dir on a tmpfs of this size ("64k"), so a
	// scenario can fill it (specdir.go); "" keeps it a plain directory.
	SpecDirSize string
	// CgroupV2 runs containerd, runc and the kubelet on a cgroup v2
	// hierarchy, in a private mount and cgroup namespace of their own
	// (the v2 rig, cgroupv2.go), so that runc enforces each container's
	// device rules with an eBPF program instead of the v1 devices
	// controller. dri-cdi's own processes stay on the host.
	CgroupV2 bool

	// Set by Suite.StartCluster (cluster.go) for a node that registers
	// with an API server: prepare runs before containerd starts,
	// kubeletArgs and kubeletConfig (extra YAML) go to the kubelet.
	prepare       func(*Node) error
	kubeletArgs   []string
	kubeletConfig string
	// Set by Suite.StartMultiNodeCluster (multinode.go): the node's name
	// (the kubelet's --hostname-override; "" is NodeName) and its own
	// mount and network namespaces (netns.go).
	nodeName string
	net      *nodeNet
}

// Node is one running containerd + kubelet (+ dri-cdi) on private paths.
type Node struct {
	// Dir holds everything of the node.
	Dir string
	// Tree is the fake DRM tree; change it to hotplug GPUs.
	Tree *drmtest.Tree
	// SysfsRoot and DevRoot are the fake DRM tree's roots.
	SysfsRoot string
	DevRoot   string
	// CDIDir is where the agent writes its CDI specs.
	CDIDir string
	// RuntimeCDIDir is containerd's cdi_spec_dirs entry.
	RuntimeCDIDir string
	// ManifestDir is the kubelet's staticPodPath.
	ManifestDir string
	// KubeletRoot is the kubelet's --root-dir.
	KubeletRoot string
	// PodResourcesSocket is the kubelet's PodResources API.
	PodResourcesSocket string
	// ContainerdSocket and NRISocket are containerd's sockets.
	ContainerdSocket string
	NRISocket        string
	// LogDir holds one log file per process.
	LogDir string
	// ConfigPath is the dri-cdi config file ("" when none).
	ConfigPath string

	suite *Suite
	opts  NodeOptions
	log   Logger
	state *nodeState

	closeOnce  sync.Once
	closeErr   error
	rig        *cgroupV2Rig
	holder     *Process
	containerd *Process
	kubelet    *Process
	agent      *Process
	nri        *Process
	delivery   string
	runDir     string
	cgroupRoot string
}

// StartNode creates and starts a node. On error everything it started is
// torn down again.
func (s *Suite) StartNode(ctx context.Context, log Logger, opts NodeOptions) (n *Node, err error) {
	if opts.Name == "" {
		opts.Name = "node"
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	id := opts.Name + "-" + hex.EncodeToString(suffix)
	dir := filepath.Join(s.WorkDir, id)
	n = &Node{
		Dir:              dir,
		SysfsRoot:        filepath.Join(dir, "drm", "sys"),
		DevRoot:          filepath.Join(dir, "drm", "dev"),
		CDIDir:           filepath.Join(dir, "cdi"),
		RuntimeCDIDir:    filepath.Join(dir, "cdi"),
		ManifestDir:      filepath.Join(dir, "manifests"),
		KubeletRoot:      filepath.Join(dir, "kubelet"),
		ContainerdSocket: filepath.Join(dir, "containerd.sock"),
		NRISocket:        filepath.Join(dir, "nri.sock"),
		LogDir:           filepath.Join(dir, "logs"),
		suite:            s,
		opts:             opts,
		log:              log,
		runDir:           filepath.Join(dir, "run"),
		cgroupRoot:       "dri-cdi-e2e-" + id,
	}
	n.PodResourcesSocket = filepath.Join(n.KubeletRoot, "pod-resources", "kubelet.sock")
	if opts.HideCDIFromRuntime {
		n.RuntimeCDIDir = filepath.Join(dir, "runtime-cdi")
	}
	if opts.CgroupV2 && opts.net != nil {
		return nil, errors.New("start node: a node of its own namespaces has no cgroup v2 rig")
	}
	if err := preflight(opts.net == nil); err != nil {
		return nil, err
	}
	if _, err := s.containerdBins(opts.Containerd); err != nil {
		return nil, err
	}
	n.state = &nodeState{Dir: dir, CgroupRoot: n.cgroupRoot, ContainerdSock: n.ContainerdSocket}
	n.state.DevicePluginBefore, n.state.DevicePluginDirExisted = dirNames(DevicePluginDir)
	_, err = os.Stat(filepath.Dir(DevicePluginDir))
	n.state.KubeletDirExisted = err == nil
	n.state.ShimSocketsBefore, n.state.RunContainerdSExisted = dirNames(runContainerdS)
	_, err = os.Stat(filepath.Dir(runContainerdS))
	n.state.RunContainerdExisted = err == nil
	_, err = os.Stat(containerLogDir)
	n.state.ContainerLogDirExisted = err == nil

	for _, d := range []string{dir, n.CDIDir, n.RuntimeCDIDir, n.ManifestDir, n.KubeletRoot, n.LogDir, n.runDir, filepath.Join(dir, "pids")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("start node: %w", err)
		}
	}
	if err := n.state.save(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start node: %w", err)
	}
	s.track(n, true)
	defer func() {
		if err != nil {
			log.Logf("node %s failed to start: %v", id, err)
			n.dumpLogs()
			if cerr := n.Close(); cerr != nil {
				log.Logf("teardown after failed start: %v", cerr)
			}
			n = nil
		}
	}()
	log.Logf("node %s: dir %s", id, dir)
	if err := createCgroups(n.cgroupRoot); err != nil {
		return n, err
	}
	n.Tree, err = drmtest.NewTree(filepath.Join(dir, "drm"), opts.GPUs...)
	if err != nil {
		return n, err
	}
	if roots := n.Tree.Roots(); roots.Sysfs != n.SysfsRoot || roots.Dev != n.DevRoot {
		return n, fmt.Errorf("fake DRM tree at %v, want %s and %s", roots, n.SysfsRoot, n.DevRoot)
	}
	if opts.SpecDirSize != "" {
		if err := n.mountSpecTmpfs(opts.SpecDirSize); err != nil {
			return n, err
		}
	}
	if opts.Config != "" {
		n.ConfigPath = filepath.Join(dir, "dri-cdi.yaml")
		if err := os.WriteFile(n.ConfigPath, []byte(opts.Config), 0o644); err != nil {
			return n, err
		}
	}
	if opts.prepare != nil {
		if err := opts.prepare(n); err != nil {
			return n, err
		}
	}
	if opts.CgroupV2 {
		if err := n.startRig(ctx); err != nil {
			return n, err
		}
	}
	if opts.net != nil {
		if err := n.startHolder(ctx); err != nil {
			return n, err
		}
	}
	if err := startInOrder(ctx, n.StartContainerd, n.importImages, n.StartKubelet); err != nil {
		return n, err
	}
	if opts.NRI {
		if err := n.StartNRI(ctx); err != nil {
			return n, err
		}
	}
	if opts.Delivery != "" {
		if err := n.StartAgent(ctx, opts.Delivery); err != nil {
			return n, err
		}
	}
	return n, nil
}

// preflight refuses to run next to a live kubelet: it would share the
// device-plugin directory and, for a node on the host's network (ports),
// the ports.
func preflight(ports bool) error {
	sock := filepath.Join(DevicePluginDir, "kubelet.sock")
	if socketLive(sock) {
		return fmt.Errorf("a kubelet is already serving %s; the e2e node needs the machine to itself", sock)
	}
	for _, port := range []int{kubeletPort, kubeletReadOnlyPort, kubeletHealthzPort} {
		if !ports {
			break
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return fmt.Errorf("kubelet port %d is taken: %w", port, err)
		}
		l.Close()
	}
	// Files of a kubelet that is gone: its checkpoint would hand our
	// kubelet allocations of a dead run.
	for _, f := range []string{"kubelet.sock", "kubelet_internal_checkpoint"} {
		_ = os.Remove(filepath.Join(DevicePluginDir, f))
	}
	return nil
}

// Close tears the node down and removes everything it created. It is safe
// to call more than once and from several goroutines; every call returns
// after the teardown finished.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.teardown() })
	return n.closeErr
}

func (n *Node) teardown() error {
	defer n.suite.track(n, false)
	start := time.Now()
	step := func(name string, f func()) {
		t := time.Now()
		f()
		if d := time.Since(t); d > 5*time.Second {
			n.log.Logf("teardown: %s took %s", name, d.Round(100*time.Millisecond))
		}
	}
	var errs []error
	if n.containerd != nil && n.containerd.Running() {
		step("removing pods", n.removeAllPods)
	}
	step("stopping dri-cdi-agent", func() { n.agent.Stop(syscall.SIGTERM, 10*time.Second) })
	step("stopping dri-cdi-nri", func() { n.nri.Stop(syscall.SIGTERM, 10*time.Second) })
	step("stopping the kubelet", func() { n.kubelet.Stop(syscall.SIGTERM, 20*time.Second) })
	step("stopping containerd", func() { n.containerd.Stop(syscall.SIGTERM, 20*time.Second) })
	step("stopping the cgroup v2 rig", n.stopRig)
	step("stopping the namespaces' holder", n.stopHolder)
	step("cleaning up", func() {
		if err := cleanupState(n.state); err != nil {
			errs = append(errs, err)
		}
	})
	n.log.Logf("node %s torn down in %s", filepath.Base(n.Dir), time.Since(start).Round(100*time.Millisecond))
	return errors.Join(errs...)
}

// removeAllPods removes the static pod manifests, gives the kubelet a
// moment to stop the pods, then stops and removes whatever sandbox is
// left through CRI.
func (n *Node) removeAllPods() {
	entries, _ := os.ReadDir(n.ManifestDir)
	for _, e := range entries {
		_ = os.Remove(filepath.Join(n.ManifestDir, e.Name()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if n.kubelet != nil && n.kubelet.Running() && len(entries) > 0 {
		_ = poll(ctx, 20*time.Second, func() (bool, error) {
			out, err := n.Crictl(ctx, "pods", "-q", "--state", "ready")
			return err == nil && strings.TrimSpace(out) == "", nil
		})
	}
	ids, _ := n.sandboxIDs(ctx)
	for _, id := range ids {
		_, _ = n.Crictl(ctx, "stopp", id)
		_, _ = n.Crictl(ctx, "rmp", "-f", id)
	}
}

// dumpLogs writes the tail of every process log to the logger.
func (n *Node) dumpLogs() {
	entries, _ := os.ReadDir(n.LogDir)
	for _, e := range entries {
		n.log.Logf("---- %s (tail) ----\n%s", e.Name(), tailFile(filepath.Join(n.LogDir, e.Name()), 6000))
	}
}

// DumpLogs writes the tail of every process log to the logger; call it
// when a scenario fails.
func (n *Node) DumpLogs() { n.dumpLogs() }

func (n *Node) logPath(name string) string { return filepath.Join(n.LogDir, name+".log") }
func (n *Node) pidDir() string             { return filepath.Join(n.Dir, "pids") }

// LogOf returns the full log of a process: containerd, kubelet, agent, nri.
func (n *Node) LogOf(name string) string {
	data, _ := os.ReadFile(n.logPath(name))
	return string(data)
}

// ---- helpers ----

// poll calls cond until it returns true or an error, or timeout/ctx end.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %v: %w", timeout, ctx.Err())
		case <-tick.C:
		}
	}
}

func httpOK(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func copyFile(src, dst string, mode os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, mode)
}

// CountLog counts the lines of a process log (containerd, kubelet, agent,
// nri) that contain every one of substrs. Logs survive restarts.
func (n *Node) CountLog(name string, substrs ...string) int {
	count := 0
	for _, line := range strings.Split(n.LogOf(name), "\n") {
		all := true
		for _, s := range substrs {
			if !strings.Contains(line, s) {
				all = false
				break
			}
		}
		if all && len(substrs) > 0 {
			count++
		}
	}
	return count
}

// WaitLog waits until CountLog(name, substrs...) reaches min.
func (n *Node) WaitLog(ctx context.Context, timeout time.Duration, min int, name string, substrs ...string) error {
	err := poll(ctx, timeout, func() (bool, error) { return n.CountLog(name, substrs...) >= min, nil })
	if err != nil {
		return fmt.Errorf("%s log: want %d lines with %q, have %d: %w", name, min, substrs, n.CountLog(name, substrs...), err)
	}
	return nil
}

// name is the node's name in the cluster.
func (n *Node) name() string {
	if n.opts.nodeName != "" {
		return n.opts.nodeName
	}
	return NodeName
}

// Name is the node's name (the kubelet's --hostname-override).
func (n *Node) Name() string { return n.name() }

// CgroupRoot is the kubelet's cgroupRoot for this node, without the
// leading slash; put other containers below it so teardown finds them.
func (n *Node) CgroupRoot() string { return n.cgroupRoot }
