package harness

import (
	"context"
	"crypto/rand"
	"crypto/tls"
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

// Cluster addresses. Everything listens on 127.0.0.1; pods get addresses
// from 198.18.0.0/15 (RFC 2544, meant for tests) on a bridge of our own,
// so no traffic leaves the machine.
const (
	// PodCIDR is host-local's range on the CNI bridge.
	PodCIDR = "198.18.0.0/16"
	// ServiceCIDR is the API server's --service-cluster-ip-range.
	ServiceCIDR = "198.19.0.0/16"
	// bridgeAddr is the host's address on the bridge: the API server's pod
	// proxy and the kubelet's probes reach pods through it. The bridge
	// plugin runs with isGateway=false (no ip_forward, no masquerade), so
	// the harness creates the bridge and its address itself.
	bridgeAddr = "198.18.0.1/16"
	// BridgeName is the CNI bridge; teardown deletes it.
	BridgeName = "dricdi-e2e0"
	// cniNetwork names the CNI network (and the results cached under
	// /var/lib/cni/results).
	cniNetwork = "dri-cdi-e2e"
	// cniCacheDir is libcni's default cache dir, which containerd does not
	// let us move.
	cniCacheDir = "/var/lib/cni"

	etcdClientPort        = 2379
	etcdPeerPort          = 2380
	apiServerPort         = 6443
	controllerManagerPort = 10257
	schedulerPort         = 10259
)

// kubernetesServiceIP is the first address of ServiceCIDR: the
// "kubernetes" Service, named in the API server's serving cert.
var kubernetesServiceIP = net.IPv4(198, 19, 0, 1)

// ClusterTools are the programs of the cluster scenarios, built by
// e2e/tools/install.sh next to the node's tools.
type ClusterTools struct {
	APIServer, ControllerManager, Scheduler, Kubectl string
	Etcd, Helm, Kustomize                            string
	// CNIBin holds the bridge, host-local and loopback plugins.
	CNIBin string
}

// FindClusterTools locates the cluster tools in $DRI_CDI_E2E_CACHE/bin.
func FindClusterTools() (ClusterTools, error) {
	dir := filepath.Join(envOr(EnvCache, DefaultCache), "bin")
	t := ClusterTools{
		APIServer:         filepath.Join(dir, "kube-apiserver"),
		ControllerManager: filepath.Join(dir, "kube-controller-manager"),
		Scheduler:         filepath.Join(dir, "kube-scheduler"),
		Kubectl:           filepath.Join(dir, "kubectl"),
		Etcd:              filepath.Join(dir, "etcd"),
		Helm:              filepath.Join(dir, "helm"),
		Kustomize:         filepath.Join(dir, "kustomize"),
		CNIBin:            filepath.Join(dir, "cni"),
	}
	return t, requireTools(t.APIServer, t.ControllerManager, t.Scheduler, t.Kubectl, t.Etcd, t.Helm, t.Kustomize,
		filepath.Join(t.CNIBin, "bridge"), filepath.Join(t.CNIBin, "host-local"), filepath.Join(t.CNIBin, "loopback"))
}

// ClusterOptions describe a single-node cluster.
type ClusterOptions struct {
	// Name is a short label for the directories (letters, digits, -).
	Name string
	// GPUs are the fake DRM devices on the node at start.
	GPUs []drmtest.GPU
	// SpecDirSize is NodeOptions.SpecDirSize of the node.
	SpecDirSize string
	// PodResourcesProxy points the daemons of the overlays at a
	// PodResourcesProxy (faults.go) in front of the kubelet's socket,
	// instead of the socket itself, so the cluster's PodResources can be
	// delayed.
	PodResourcesProxy bool
	// CgroupV2 runs the node on the cgroup v2 rig (NodeOptions.CgroupV2):
	// the product's DaemonSets then see the rig's cgroup2 tree at
	// /sys/fs/cgroup, as on a v2 host.
	CgroupV2 bool
}

// Cluster is etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler as host processes, plus one Node whose kubelet registers
// with them and whose pods get a CNI bridge network. dri-cdi is not
// started: scenarios deploy it from its own manifests and image.
type Cluster struct {
	// Dir holds the control plane's data, certificates and logs.
	Dir string
	// Node is the cluster's only node; nil in a multi-node cluster
	// (multinode.go).
	Node *Node
	// Nodes are the cluster's nodes, in the order they started.
	Nodes []*Node
	// PKI holds the CA, certificates and kubeconfigs.
	PKI *PKI
	// Kubeconfig is the admin's (system:masters).
	Kubeconfig string
	Tools      ClusterTools
	// Image is the product image reference imported from the archive.
	Image string
	// PodResources is the proxy the daemons dial for PodResources, nil
	// unless ClusterOptions.PodResourcesProxy.
	PodResources *PodResourcesProxy

	suite *Suite
	log   Logger
	// apiHost is the address the API server serves on: loopback, or the
	// host bridge's in a multi-node cluster.
	apiHost string
	// nodeView is where each node of a multi-node cluster sees its own
	// directory (netns.go); "" in a single-node cluster.
	nodeView string
	// extraArgs are flags a kind of cluster adds to a control-plane
	// component, by its name.
	extraArgs map[string][]string

	etcd, apiServer, controllerManager, scheduler *Process
	cniCacheExisted, cniResultsExisted            bool
	state                                         *nodeState

	closeOnce sync.Once
	closeErr  error
}

// StartCluster starts the control plane, then the node (containerd and a
// kubelet that registers with the API server), imports the product image
// and waits until the node is Ready. On error everything it started is
// torn down again.
func (s *Suite) StartCluster(ctx context.Context, log Logger, opts ClusterOptions) (*Cluster, error) {
	if opts.Name == "" {
		opts.Name = "cluster"
	}
	c, err := s.newCluster(log, opts.Name, "127.0.0.1")
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := c.startControlPlane(ctx); err != nil {
		return c.failed(err)
	}
	if err := createBridge(); err != nil {
		return c.failed(err)
	}
	c.Node, err = s.StartNode(ctx, log, NodeOptions{
		Name:        opts.Name,
		GPUs:        opts.GPUs,
		SpecDirSize: opts.SpecDirSize,
		CgroupV2:    opts.CgroupV2,
		prepare:     c.prepareNode,
		kubeletArgs: []string{
			"--kubeconfig=" + c.PKI.Kubeconfigs["kubelet"],
			"--node-ip=127.0.0.1",
		},
		kubeletConfig: "registerNode: true\nclusterDomain: cluster.local\n",
	})
	if err != nil {
		return c.failed(err)
	}
	c.Nodes = []*Node{c.Node}
	if opts.PodResourcesProxy {
		c.PodResources, err = StartPodResourcesProxy(filepath.Join(c.Dir, "pod-resources", "kubelet.sock"), c.Node.PodResourcesSocket)
		if err != nil {
			return c.failed(err)
		}
	}
	if err := c.nodesReady(ctx); err != nil {
		return c.failed(err)
	}
	log.Logf("cluster ready in %s: node %s Ready, image %s imported", time.Since(start).Round(100*time.Millisecond), NodeName, c.Image)
	return c, nil
}

// newCluster checks the tools, the product image and the control plane's
// ports, and makes the cluster's directory and its state for the reaper.
func (s *Suite) newCluster(log Logger, name, apiHost string) (*Cluster, error) {
	tools, err := FindClusterTools()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(ImageArchive()); err != nil {
		return nil, fmt.Errorf("product image archive: %w (run `make image`)", err)
	}
	if err := clusterPreflight(); err != nil {
		return nil, err
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	c := &Cluster{
		Dir:     filepath.Join(s.WorkDir, "cp-"+name+"-"+hex.EncodeToString(suffix)),
		Tools:   tools,
		suite:   s,
		log:     log,
		apiHost: apiHost,
	}
	for _, d := range []string{c.Dir, c.logDir(), c.pidDir(), filepath.Join(c.Dir, "etcd")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	// The reaper of a later run undoes the dir by this state: processes by
	// pid file, mounts, the dir; nothing in the shared host directories,
	// which belong to the node.
	c.state = controlPlaneState(c.Dir)
	if err := c.state.save(); err != nil {
		os.RemoveAll(c.Dir)
		return nil, err
	}
	return c, nil
}

// failed tears down what a start began, after logging err and the logs,
// and returns err.
func (c *Cluster) failed(err error) (*Cluster, error) {
	c.log.Logf("cluster failed to start: %v", err)
	c.DumpLogs()
	if cerr := c.Close(); cerr != nil {
		c.log.Logf("teardown after failed start: %v", cerr)
	}
	return nil, err
}

// startControlPlane makes the PKI and starts etcd, the API server (on
// apiHost), the controller manager and the scheduler, each with extra
// flags of the cluster's kind (extraArgs).
func (c *Cluster) startControlPlane(ctx context.Context) error {
	start := time.Now()
	_, err := os.Stat(cniCacheDir)
	c.cniCacheExisted = err == nil
	_, err = os.Stat(filepath.Join(cniCacheDir, "results"))
	c.cniResultsExisted = err == nil
	removeCNIResults()
	if err := deleteBridge(); err != nil {
		return err
	}
	server := fmt.Sprintf("https://%s:%d", c.apiHost, apiServerPort)
	if c.PKI, err = newPKI(filepath.Join(c.Dir, "pki"), server, kubernetesServiceIP, net.ParseIP(c.apiHost)); err != nil {
		return fmt.Errorf("cluster PKI: %w", err)
	}
	c.Kubeconfig = c.PKI.Kubeconfigs["admin"]
	if err := startInOrder(ctx, c.startEtcd, c.startAPIServer, c.startControllerManager, c.startScheduler); err != nil {
		return err
	}
	c.log.Logf("control plane up in %s", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// nodesReady imports the product image into every node, waits until each
// is Ready, and until pods can be made (the default ServiceAccount).
func (c *Cluster) nodesReady(ctx context.Context) error {
	for _, n := range c.Nodes {
		img, err := c.importProductImage(ctx, n, ImageArchive())
		if err != nil {
			return err
		}
		if c.Image != "" && img != c.Image {
			return fmt.Errorf("node %s imported %s, node %s %s", n.name(), img, c.Nodes[0].name(), c.Image)
		}
		c.Image = img
	}
	for _, n := range c.Nodes {
		if err := c.WaitNodeReadyNamed(ctx, n.name(), 120*time.Second); err != nil {
			return err
		}
	}
	// Pods are refused until the namespace's default ServiceAccount exists.
	err := poll(ctx, 60*time.Second, func() (bool, error) {
		_, err := c.Kubectl(ctx, "get", "serviceaccount", "default", "-n", "default")
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the default ServiceAccount: %w", err)
	}
	return nil
}

// NodeNamed is the cluster's node of that name, nil when there is none.
func (c *Cluster) NodeNamed(name string) *Node {
	for _, n := range c.Nodes {
		if n.name() == name {
			return n
		}
	}
	return nil
}

// podResourcesDir is the host directory the overlays mount as the
// daemons' pod-resources dir: the proxy's, or the kubelet's own.
func (c *Cluster) podResourcesDir() string {
	if c.PodResources != nil {
		return filepath.Dir(c.PodResources.Socket)
	}
	return filepath.Dir(c.Node.PodResourcesSocket)
}

// ImageArchive is the product image archive `make image` writes
// ($DRI_CDI_E2E_IMAGE, else _output/dri-cdi-image.tar in the repository).
func ImageArchive() string {
	if p := os.Getenv(EnvImage); p != "" {
		return p
	}
	root, err := RepoRoot()
	if err != nil {
		return "_output/dri-cdi-image.tar"
	}
	return filepath.Join(root, "_output", "dri-cdi-image.tar")
}

// EnvImage overrides where the product image archive is read from.
const EnvImage = "DRI_CDI_E2E_IMAGE"

func clusterPreflight() error {
	for _, port := range []int{etcdClientPort, etcdPeerPort, apiServerPort, controllerManagerPort, schedulerPort} {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return fmt.Errorf("control-plane port %d is taken: %w", port, err)
		}
		l.Close()
	}
	return nil
}

func (c *Cluster) logDir() string             { return filepath.Join(c.Dir, "logs") }
func (c *Cluster) pidDir() string             { return filepath.Join(c.Dir, "pids") }
func (c *Cluster) logPath(name string) string { return filepath.Join(c.logDir(), name+".log") }
func (c *Cluster) start(name string, argv ...string) (*Process, error) {
	p, err := startProc(name, c.logPath(name), c.pidDir(), nil, argv...)
	if err == nil {
		c.log.Logf("%s started (pid %d)", name, p.Pid())
	}
	return p, err
}

// waitHealthy polls a control-plane component's /healthz (or /readyz), which
// answer anonymous requests.
func (c *Cluster) waitHealthy(ctx context.Context, p *Process, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		// Loopback only; the components' serving certs are self-signed.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	return p.waitReady(ctx, p.name, timeout, func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func (c *Cluster) startEtcd(ctx context.Context) (err error) {
	c.etcd, err = c.start("etcd", c.Tools.Etcd,
		"-data-dir", filepath.Join(c.Dir, "etcd"),
		"-listen-client-url", fmt.Sprintf("http://127.0.0.1:%d", etcdClientPort),
		"-listen-peer-url", fmt.Sprintf("http://127.0.0.1:%d", etcdPeerPort))
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, c.etcd, fmt.Sprintf("http://127.0.0.1:%d/health", etcdClientPort), 60*time.Second)
}

func (c *Cluster) startAPIServer(ctx context.Context) (err error) {
	c.apiServer, err = c.start("kube-apiserver", append([]string{c.Tools.APIServer,
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdClientPort),
		"--bind-address=" + c.apiHost,
		"--advertise-address=" + c.apiHost,
		fmt.Sprintf("--secure-port=%d", apiServerPort),
		// It refuses a loopback advertise address otherwise.
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--tls-cert-file=" + c.PKI.APIServerCert,
		"--tls-private-key-file=" + c.PKI.APIServerKey,
		"--client-ca-file=" + c.PKI.CA,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + c.PKI.ServiceAccountPub,
		"--service-account-signing-key-file=" + c.PKI.ServiceAccountKey,
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--profiling=false",
		"--cert-dir=" + filepath.Join(c.Dir, "apiserver-certs"),
		"--v=1"}, c.extraArgs["kube-apiserver"]...)...)
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, c.apiServer, fmt.Sprintf("https://%s:%d/readyz", c.apiHost, apiServerPort), 120*time.Second)
}

// componentArgv is the command line of kube-controller-manager or
// kube-scheduler (bin; name keys its kubeconfig and cert dir): what both
// share -- their kubeconfig, also for delegated authn/authz, secure serving
// on loopback at port, no leader election -- then extra.
func (c *Cluster) componentArgv(bin, name string, port int, extra ...string) []string {
	kc := c.PKI.Kubeconfigs[name]
	return append([]string{bin,
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + filepath.Join(c.Dir, name+"-certs"),
		"--leader-elect=false",
		"--v=1",
	}, append(extra, c.extraArgs[name]...)...)
}

func (c *Cluster) startControllerManager(ctx context.Context) (err error) {
	c.controllerManager, err = c.start("kube-controller-manager", c.componentArgv(c.Tools.ControllerManager, "controller-manager", controllerManagerPort,
		"--service-account-private-key-file="+c.PKI.ServiceAccountKey,
		"--root-ca-file="+c.PKI.CA,
		// Each controller acts as its own ServiceAccount, which the RBAC
		// bootstrap roles grant what it needs (the controller-manager's own
		// user may not, e.g., untaint nodes or run DaemonSets).
		"--use-service-account-credentials=true",
		"--service-cluster-ip-range="+ServiceCIDR)...)
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, c.controllerManager, fmt.Sprintf("https://127.0.0.1:%d/healthz", controllerManagerPort), 60*time.Second)
}

func (c *Cluster) startScheduler(ctx context.Context) (err error) {
	c.scheduler, err = c.start("kube-scheduler", c.componentArgv(c.Tools.Scheduler, "scheduler", schedulerPort)...)
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, c.scheduler, fmt.Sprintf("https://127.0.0.1:%d/healthz", schedulerPort), 60*time.Second)
}

// prepareNode runs before the node's containerd starts: it gives the
// runtime its own NRI socket directory (the DaemonSet mounts that
// directory, as it mounts /var/run/nri on a real node) and the CNI
// network: on the host, the harness's bridge without a gateway (the
// harness gives the bridge its address); in a node's own network
// namespace, a bridge there that is its pods' default gateway, in the
// node's pod range.
func (c *Cluster) prepareNode(n *Node) error {
	n.NRISocket = filepath.Join(n.Dir, "nri-run", "nri.sock")
	binDir, confDir := filepath.Join(n.Dir, "cni", "bin"), filepath.Join(n.Dir, "cni", "net.d")
	for _, d := range []string{filepath.Dir(n.NRISocket), binDir, confDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if err := os.Symlink(filepath.Join(c.Tools.CNIBin, p), filepath.Join(binDir, p)); err != nil {
			return err
		}
	}
	bridge, gateway, subnet, first := BridgeName, false, PodCIDR, "198.18.0.10"
	if nn := n.opts.net; nn != nil {
		bridge, gateway, subnet = nodeBridge, true, nn.podSubnet()
		first = fmt.Sprintf("198.18.%d.10", nn.index)
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": %t,
    "isDefaultGateway": %t,
    "ipMasq": false,
    "ipam": {
      "type": "host-local",
      "dataDir": %q,
      "ranges": [[{"subnet": %q, "rangeStart": %q}]]
    }
  }]
}
`, cniNetwork, bridge, gateway, gateway, filepath.Join(n.Dir, "cni", "ipam"), subnet, first)
	return os.WriteFile(filepath.Join(confDir, "10-"+cniNetwork+".conflist"), []byte(conf), 0o644)
}

// importProductImage imports the archive `make image` wrote into node n
// and returns the reference it names; the manifests must name the same.
func (c *Cluster) importProductImage(ctx context.Context, n *Node, archive string) (string, error) {
	before, err := n.Ctr(ctx, "-n", "k8s.io", "images", "ls", "-q")
	if err != nil {
		return "", err
	}
	if out, err := n.Ctr(ctx, "-n", "k8s.io", "images", "import", archive); err != nil {
		return "", fmt.Errorf("import %s: %w\n%s", archive, err, out)
	}
	after, err := n.Ctr(ctx, "-n", "k8s.io", "images", "ls", "-q")
	if err != nil {
		return "", err
	}
	var refs []string
	for _, r := range strings.Fields(after) {
		// ctr mixes its warnings (time=... level=...) into the output.
		if !strings.Contains(before, r) && !strings.HasPrefix(r, "sha256:") && !strings.Contains(r, "=") && strings.Contains(r, "/") {
			refs = append(refs, r)
		}
	}
	if len(refs) != 1 {
		return "", fmt.Errorf("importing %s added images %v, want exactly one named image", archive, refs)
	}
	return refs[0], nil
}

// TagImage gives the product image a second tag in every node's runtime,
// as a new release pulled under another tag would be.
func (c *Cluster) TagImage(ctx context.Context, tag string) (string, error) {
	ref := c.Image[:strings.LastIndexByte(c.Image, ':')+1] + tag
	for _, n := range c.Nodes {
		if out, err := n.Ctr(ctx, "-n", "k8s.io", "images", "tag", "--force", c.Image, ref); err != nil {
			return "", fmt.Errorf("tag %s as %s on node %s: %w\n%s", c.Image, ref, n.name(), err, out)
		}
	}
	return ref, nil
}

// Close tears the cluster down: workloads first (controllers stopped,
// pods force-deleted so the kubelet stops them), then the node, the API
// server and etcd, the CNI bridge and cached CNI results, and the
// cluster's directory. It may be called more than once.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.teardown() })
	return c.closeErr
}

func (c *Cluster) teardown() error {
	start := time.Now()
	var errs []error
	c.controllerManager.Stop(syscall.SIGTERM, 10*time.Second)
	c.scheduler.Stop(syscall.SIGTERM, 10*time.Second)
	if len(c.Nodes) > 0 && c.apiServer != nil && c.apiServer.Running() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, _ = c.Kubectl(ctx, "delete", "pods", "--all", "--all-namespaces", "--force", "--grace-period=0", "--wait=false")
		_ = poll(ctx, 45*time.Second, func() (bool, error) {
			for _, n := range c.Nodes {
				out, err := n.Crictl(ctx, "pods", "-q", "--state", "ready")
				if err != nil || strings.TrimSpace(out) != "" {
					return false, nil
				}
			}
			return true, nil
		})
		cancel()
	}
	// The last node first: the first one made the shared host
	// directories it found missing, and removes them when they are empty.
	for i := len(c.Nodes) - 1; i >= 0; i-- {
		errs = append(errs, c.Nodes[i].Close())
	}
	if c.Node != nil && len(c.Nodes) == 0 {
		errs = append(errs, c.Node.Close())
	}
	if err := c.PodResources.Close(); err != nil {
		errs = append(errs, err)
	}
	c.apiServer.Stop(syscall.SIGTERM, 20*time.Second)
	c.etcd.Stop(syscall.SIGTERM, 20*time.Second)
	removeCNIResults()
	if !c.cniResultsExisted {
		_ = os.Remove(filepath.Join(cniCacheDir, "results"))
	}
	if !c.cniCacheExisted {
		_ = os.Remove(cniCacheDir)
	}
	if err := cleanupState(c.state); err != nil {
		errs = append(errs, err)
	}
	c.log.Logf("cluster torn down in %s", time.Since(start).Round(100*time.Millisecond))
	return errors.Join(errs...)
}

// DumpLogs writes the tail of every control-plane and node log.
func (c *Cluster) DumpLogs() {
	entries, _ := os.ReadDir(c.logDir())
	for _, e := range entries {
		c.log.Logf("---- %s (tail) ----\n%s", e.Name(), tailFile(filepath.Join(c.logDir(), e.Name()), 4000))
	}
	for _, n := range c.Nodes {
		n.log.Logf("==== node %s ====", n.name())
		n.DumpLogs()
	}
	if c.Node != nil && len(c.Nodes) == 0 {
		c.Node.DumpLogs()
	}
}

// removeCNIResults removes what libcni cached for our network's
// containers; a CNI DEL removes its own entry, a killed run leaves them.
func removeCNIResults() {
	matches, _ := filepath.Glob(filepath.Join(cniCacheDir, "results", cniNetwork+"-*"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}

// createBridge creates the single node's CNI bridge with the host's
// address.
func createBridge() error { return addBridge(context.Background(), BridgeName, bridgeAddr) }

// deleteBridge removes the CNI bridge (with its address and route) if it
// exists; the pods' veth ends go with their network namespaces.
func deleteBridge() error { return deleteLink(BridgeName) }

// controlPlaneState is a nodeState under which cleanupState touches
// nothing but dir and the CNI bridge: every shared directory counts as
// pre-existing with all of its current entries.
func controlPlaneState(dir string) *nodeState {
	st := &nodeState{Dir: dir, DevicePluginDirExisted: true, KubeletDirExisted: true,
		RunContainerdExisted: true, RunContainerdSExisted: true, ContainerLogDirExisted: true,
		Links: []string{BridgeName}}
	st.DevicePluginBefore, _ = dirNames(DevicePluginDir)
	st.ShimSocketsBefore, _ = dirNames(runContainerdS)
	return st
}
