package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Kubelet ports on 127.0.0.1.
const (
	kubeletPort         = 10250
	kubeletReadOnlyPort = 10255
	kubeletHealthzPort  = 10248
)

func (n *Node) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: %d
healthzBindAddress: %s
healthzPort: %d
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://%s
imageServiceEndpoint: unix://%s
staticPodPath: %s
podLogsDir: %s
cgroupDriver: cgroupfs
cgroupRoot: %s
failCgroupV1: false
failSwapOn: false
fileCheckFrequency: 2s
syncFrequency: 10s
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
%s`, n.kubeletAddress(), kubeletPort, kubeletReadOnlyPort, n.kubeletAddress(), kubeletHealthzPort, n.ContainerdSocket, n.ContainerdSocket,
		n.ManifestDir, filepath.Join(n.Dir, "pod-logs"), n.kubeletCgroupRoot(), n.rigKubeletConfig()+n.opts.kubeletConfig)
}

// StartKubelet starts the kubelet and waits until it is healthy and
// serves its device-plugin registration and PodResources sockets.
func (n *Node) StartKubelet(ctx context.Context) error {
	cfg := filepath.Join(n.Dir, "kubelet.yaml")
	if err := os.WriteFile(cfg, []byte(n.kubeletConfig()), 0o644); err != nil {
		return err
	}
	reg := filepath.Join(DevicePluginDir, "kubelet.sock")
	root := n.KubeletRoot
	if n.holder != nil {
		// The node's kubelet dir is /var/lib/kubelet in its namespace
		// (netns.go); the harness reaches it at KubeletRoot.
		reg = filepath.Join(n.KubeletRoot, "device-plugins", "kubelet.sock")
		root = hostKubeletDir
	}
	args := append([]string{n.suite.Tools.Kubelet,
		"--config=" + cfg,
		"--root-dir=" + root,
		"--cert-dir=" + filepath.Join(root, "pki"),
		"--hostname-override=" + n.name(),
		"--v=2"}, n.opts.kubeletArgs...)
	p, err := startProc("kubelet", n.logPath("kubelet"), n.pidDir(), nil, n.inNamespaces(args...)...)
	if err != nil {
		return err
	}
	n.kubelet = p
	n.log.Logf("kubelet started (pid %d)", p.Pid())
	healthz := fmt.Sprintf("http://%s:%d/healthz", n.kubeletAddress(), kubeletHealthzPort)
	return p.waitReady(ctx, "kubelet", 120*time.Second, func() bool {
		return httpOK(ctx, healthz) && socketLive(reg) && socketLive(n.PodResourcesSocket)
	})
}

// StopKubelet stops the kubelet; its pods keep running.
func (n *Node) StopKubelet() {
	n.kubelet.Stop(syscall.SIGTERM, 20*time.Second)
}

// RestartKubelet stops and starts the kubelet.
func (n *Node) RestartKubelet(ctx context.Context) error {
	n.StopKubelet()
	return n.StartKubelet(ctx)
}
