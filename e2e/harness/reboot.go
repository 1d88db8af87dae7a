package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"time"
)

// SimulateReboot does to the node what a reboot does to its runtime: the
// kubelet and containerd stop, every container process dies, their
// mounts (rootfs, shm, network namespaces, pod volumes) go; then
// containerd and the kubelet start again on the same disk state
// (images, the kubelet's checkpoints, CDI specs). Pods come back only as
// the kubelet recreates them.
func (n *Node) SimulateReboot(ctx context.Context) error {
	n.log.Logf("simulating a reboot of node %s", filepath.Base(n.Dir))
	n.kubelet.Stop(syscall.SIGKILL, 10*time.Second)
	n.containerd.Stop(syscall.SIGKILL, 10*time.Second)
	if err := killNodeProcesses(n.state); err != nil {
		return fmt.Errorf("reboot: %w", err)
	}
	for _, d := range []string{filepath.Join(n.Dir, "containerd"), n.KubeletRoot} {
		if err := unmountUnder(d); err != nil {
			return fmt.Errorf("reboot: %w", err)
		}
	}
	if err := n.StartContainerd(ctx); err != nil {
		return fmt.Errorf("reboot: %w", err)
	}
	if err := n.StartKubelet(ctx); err != nil {
		return fmt.Errorf("reboot: %w", err)
	}
	return nil
}
