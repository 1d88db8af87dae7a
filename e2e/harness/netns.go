package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A node of its own (multinode.go): the node's kubelet and containerd run
// in a mount and network namespace that a holder process keeps.
//
// The holder runs `unshare --mount --net --propagation private`, so
// nothing mounted inside reaches the host and the node has its own
// interfaces, ports and sysctls. Inside, it binds
//
//   - the node's kubelet dir over /var/lib/kubelet: the kubelet's fixed
//     device-plugin dir, plugins_registry, plugins and pod-resources are
//     the node's own at their default paths, which the product's
//     DaemonSets mount unchanged;
//   - the node's whole directory over the cluster's view dir
//     (Cluster.nodeView): the fake DRM tree, the CDI dir and the NRI
//     socket dir are at the same path on every node, so one overlay
//     serves every node.
//
// Everything the runtime does happens in that mount namespace: runc
// resolves the pods' hostPaths and the CDI specs' device paths there.
// The harness itself stays on the host and reaches the same files under
// the node's directory.
//
// The network: a host bridge (hostBridge) with hostBridgeAddr; each node
// a veth into it, its end in the node's namespace as eth0 with
// 198.18.255.(10+N)/24 and a default route via the bridge address. The
// node's pods are on a CNI bridge inside the node's namespace, in
// 198.18.N.0/24 with the bridge plugin as their gateway, and the host
// routes that range via the node's address, so the API server reaches
// the kubelets and the pods (logs, exec, proxied scrapes). ip_forward is
// set in the node's namespace only; the host's sysctls are never
// touched, and nothing needs iptables.

const (
	// hostBridge is the bridge the nodes' veths join; teardown deletes it
	// with the veths' host ends and the routes through it.
	hostBridge = "dricdi-mn0"
	// hostBridgeIP is the host's address on it: the API server serves
	// there, and the nodes route through it.
	hostBridgeIP = "198.18.255.1"
	// nodeBridge is the CNI bridge inside every node's namespace.
	nodeBridge = "dricdi-pods"
	// nodeIface is the node's end of its veth.
	nodeIface = "eth0"
	// hostKubeletDir is where the node's kubelet dir is bound in its mount
	// namespace: the kubelet's default --root-dir.
	hostKubeletDir = "/var/lib/kubelet"
)

// holderReady is what the holder prints once its mounts are in place.
const holderReady = "node namespaces ready"

// holderEnv is the variable in a holder's environment that names its
// node's directory.
const holderEnv = "DRI_CDI_E2E_HOLDER"

// nodeNet is what a node of its own needs from its cluster: its index
// (1, 2, 3, ...: its address and pod range) and the view dir.
type nodeNet struct {
	index int
	view  string
}

// nodeIP is the node's address on the host bridge.
func (nn *nodeNet) nodeIP() string { return fmt.Sprintf("198.18.255.%d", 10+nn.index) }

// podSubnet is the node's pod range.
func (nn *nodeNet) podSubnet() string { return fmt.Sprintf("198.18.%d.0/24", nn.index) }

// veth is the host end of the node's veth.
func (nn *nodeNet) veth() string { return fmt.Sprintf("dricdi-mn%dh", nn.index) }

// startHolder starts the node's holder, waits for its mounts, and wires
// its network.
func (n *Node) startHolder(ctx context.Context) error {
	nn := n.opts.net
	for _, tool := range []string{"unshare", "nsenter", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("node namespaces: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(n.Dir, "kubelet"), 0o755); err != nil {
		return err
	}
	// $0 the node dir, $1 the view dir.
	script := `mount --bind "$0" "$1" && mount --bind "$0/kubelet" ` + hostKubeletDir +
		` && ip link set lo up && echo "` + holderReady + `" && exec sleep infinity`
	// The holder ends as `sleep infinity`; holderEnv names its node, so
	// that Leftovers finds it.
	p, err := startProc("holder", n.logPath("holder"), n.pidDir(), []string{holderEnv + "=" + n.Dir},
		"/usr/bin/unshare", "--mount", "--net", "--propagation", "private", "--", "/bin/sh", "-c", script, n.Dir, nn.view)
	if err != nil {
		return err
	}
	n.holder = p
	if err := p.waitReady(ctx, "the node's namespaces", 10*time.Second, func() bool {
		return slices.Contains(strings.Split(tailFile(n.logPath("holder"), 2000), "\n"), holderReady)
	}); err != nil {
		return err
	}
	pid := strconv.Itoa(p.Pid())
	in := func(args ...string) []string {
		return append([]string{"nsenter", "--target", pid, "--net", "--"}, args...)
	}
	for _, argv := range [][]string{
		{"ip", "link", "add", nn.veth(), "type", "veth", "peer", "name", nodeIface, "netns", pid},
		{"ip", "link", "set", nn.veth(), "master", hostBridge, "up"},
		in("ip", "addr", "add", nn.nodeIP()+"/24", "dev", nodeIface),
		in("ip", "link", "set", nodeIface, "up"),
		in("ip", "route", "add", "default", "via", hostBridgeIP),
		// The node forwards between its pods and the host; this is the
		// node namespace's own sysctl.
		in("sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"),
		{"ip", "route", "add", nn.podSubnet(), "via", nn.nodeIP(), "dev", hostBridge},
	} {
		if err := runCmd(ctx, argv...); err != nil {
			return fmt.Errorf("node %s network: %w", n.name(), err)
		}
	}
	n.log.Logf("node %s: namespaces of holder pid %d, address %s, pods %s", n.name(), p.Pid(), nn.nodeIP(), nn.podSubnet())
	return nil
}

// stopHolder stops the holder; the namespaces, with their mounts, the
// veth and its host end, go with the last process in them.
func (n *Node) stopHolder() {
	if n.holder == nil {
		return
	}
	n.holder.Stop(syscall.SIGTERM, 5*time.Second)
	_ = deleteLink(n.opts.net.veth())
}

// inNamespaces returns argv to run in the node's namespaces (nsenter
// execs argv, keeping its PID); without them argv itself, or the cgroup
// v2 rig's (inRig).
func (n *Node) inNamespaces(argv ...string) []string {
	if n.holder == nil {
		return n.inRig(argv...)
	}
	return append([]string{"/usr/bin/nsenter", "--target", strconv.Itoa(n.holder.Pid()), "--mount", "--net", "--"}, argv...)
}

// inNetwork returns argv to run in the node's network namespace only,
// for a client on the host's filesystem that must reach what listens in
// the node (crictl exec reaches containerd's streaming server there).
func (n *Node) inNetwork(argv ...string) []string {
	if n.holder == nil {
		return argv
	}
	return append([]string{"/usr/bin/nsenter", "--target", strconv.Itoa(n.holder.Pid()), "--net", "--"}, argv...)
}

// kubeletAddress is where the kubelet listens: the node's address, or
// loopback on the host.
func (n *Node) kubeletAddress() string {
	if n.opts.net != nil {
		return n.opts.net.nodeIP()
	}
	return "127.0.0.1"
}

// addBridge creates a bridge with the host's address cidr on it, up.
func addBridge(ctx context.Context, name, cidr string) error {
	for _, argv := range [][]string{
		{"ip", "link", "add", name, "type", "bridge"},
		{"ip", "addr", "add", cidr, "dev", name},
		{"ip", "link", "set", name, "up"},
	} {
		if err := runCmd(ctx, argv...); err != nil {
			return err
		}
	}
	return nil
}

// deleteLink removes a link if it exists, with its addresses and the
// routes through it (a bridge's ports stay, detached).
func deleteLink(name string) error {
	if _, err := net.InterfaceByName(name); err != nil {
		return nil
	}
	return runCmd(context.Background(), "ip", "link", "delete", name)
}

func runCmd(ctx context.Context, argv ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
