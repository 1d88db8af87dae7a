package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// A multi-node cluster: the control plane of StartCluster on the host,
// serving on the host bridge's address, and several nodes, each a kubelet
// and a containerd in mount and network namespaces of their own
// (netns.go), so that every node has its own /var/lib/kubelet (the
// kubelet's fixed device-plugin dir), kubelet cgroup root, containerd
// root, state and sockets (the NRI socket too), CDI dir, /dev and fake
// sysfs, addresses and ports, as separate machines do.

// NodeSpec describes one node of a multi-node cluster.
type NodeSpec struct {
	// Name is the node's name (a DNS label).
	Name string
	// GPUs are the fake DRM devices on the node at start.
	GPUs []drmtest.GPU
}

// MultiNodeOptions describe a multi-node cluster.
type MultiNodeOptions struct {
	// Name is a short label for the directories (letters, digits, -).
	Name string
	// Nodes are the nodes, started in this order; at most 9.
	Nodes []NodeSpec
	// NodeMonitorGracePeriod is the controller manager's
	// --node-monitor-grace-period: how long a node may miss its
	// heartbeats before it is NotReady (0: 30s, so that a node failure
	// shows within a scenario's time; the default is 50s).
	NodeMonitorGracePeriod time.Duration
}

// nodeNameRE is a DNS label, as a node name in the scenarios must be.
var nodeNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$`)

func (o MultiNodeOptions) validate() error {
	if len(o.Nodes) == 0 || len(o.Nodes) > 9 {
		return fmt.Errorf("multi-node cluster: %d nodes, want 1 to 9", len(o.Nodes))
	}
	seen := map[string]bool{}
	for _, n := range o.Nodes {
		if !nodeNameRE.MatchString(n.Name) {
			return fmt.Errorf("multi-node cluster: node name %q is not a DNS label of at most 32 characters", n.Name)
		}
		if seen[n.Name] {
			return fmt.Errorf("multi-node cluster: node name %q twice", n.Name)
		}
		seen[n.Name] = true
	}
	return nil
}

// auditPolicy logs, with their metadata only, the requests of the nodes'
// kubelets and of the service accounts of namespace dri-cdi (dri-cdi's
// own pods), and nothing else: what each node adds to the API server's
// load (AuditLog).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:nodes", "system:serviceaccounts:dri-cdi"]
- level: None
`

// registeredKubelet is the KubeletConfiguration of a node that registers
// with the API server.
const registeredKubelet = "registerNode: true\nclusterDomain: cluster.local\n"

// StartMultiNodeCluster starts the control plane on the host bridge's
// address, then each node in its own namespaces, registered under its
// name with its own kubelet credentials, imports the product image into
// every node and waits until all are Ready. On error everything it
// started is torn down again.
func (s *Suite) StartMultiNodeCluster(ctx context.Context, log Logger, opts MultiNodeOptions) (*Cluster, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.Name == "" {
		opts.Name = "multinode"
	}
	grace := opts.NodeMonitorGracePeriod
	if grace == 0 {
		grace = 30 * time.Second
	}
	c, err := s.newCluster(log, opts.Name, hostBridgeIP)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	c.nodeView = filepath.Join(c.Dir, "node")
	if err := os.MkdirAll(c.nodeView, 0o755); err != nil {
		return c.failed(err)
	}
	// /var/lib/kubelet is the mount point of every node's kubelet dir;
	// the cluster makes it when the host has none and removes it again.
	_, err = os.Stat(hostKubeletDir)
	c.state.KubeletDirExisted = err == nil
	c.state.Links = append(c.state.Links, hostBridge)
	if err := c.state.save(); err != nil {
		return c.failed(err)
	}
	if err := os.MkdirAll(hostKubeletDir, 0o755); err != nil {
		return c.failed(err)
	}
	// A bridge a killed run left.
	if err := deleteLink(hostBridge); err != nil {
		return c.failed(err)
	}
	if err := addBridge(ctx, hostBridge, hostBridgeIP+"/24"); err != nil {
		return c.failed(err)
	}
	policy := filepath.Join(c.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return c.failed(err)
	}
	c.extraArgs = map[string][]string{
		"kube-apiserver": {"--audit-policy-file=" + policy, "--audit-log-path=" + c.AuditLogPath()},
		"controller-manager": {
			"--node-monitor-grace-period=" + grace.String(),
			"--node-monitor-period=2s",
		},
	}
	if err := c.startControlPlane(ctx); err != nil {
		return c.failed(err)
	}
	for i, spec := range opts.Nodes {
		kc, err := c.PKI.NodeKubeconfig(spec.Name)
		if err != nil {
			return c.failed(err)
		}
		nn := &nodeNet{index: i + 1, view: c.nodeView}
		n, err := s.StartNode(ctx, log, NodeOptions{
			Name:          spec.Name,
			GPUs:          spec.GPUs,
			prepare:       c.prepareNode,
			kubeletArgs:   []string{"--kubeconfig=" + kc, "--node-ip=" + nn.nodeIP()},
			kubeletConfig: registeredKubelet,
			nodeName:      spec.Name,
			net:           nn,
		})
		if err != nil {
			return c.failed(err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	if err := c.nodesReady(ctx); err != nil {
		return c.failed(err)
	}
	log.Logf("multi-node cluster ready in %s: %d nodes Ready, image %s imported", time.Since(start).Round(100*time.Millisecond), len(c.Nodes), c.Image)
	return c, nil
}

// NodeIP is the node's address, on which its kubelet serves and its
// hostNetwork pods listen; "" for the single node (loopback).
func (n *Node) NodeIP() string {
	if n.opts.net == nil {
		return ""
	}
	return n.opts.net.nodeIP()
}

// PodSubnet is the node's pod range in a multi-node cluster ("" for the
// single node, whose pods share PodCIDR).
func (n *Node) PodSubnet() string {
	if n.opts.net == nil {
		return ""
	}
	return n.opts.net.podSubnet()
}
