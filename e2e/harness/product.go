package harness

import (
	"context"
	"syscall"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin"
)

// Delivery modes of dri-cdi-agent, as the strings its --delivery flag
// takes. pkg/deviceplugin owns the names.
const (
	DeliveryCDICRI      = string(deviceplugin.DeliveryCDICRI)
	DeliveryNRI         = string(deviceplugin.DeliveryNRI)
	DeliveryDeviceSpecs = string(deviceplugin.DeliveryDeviceSpecs)
)

// StartAgent starts dri-cdi-agent in a delivery mode.
func (n *Node) StartAgent(ctx context.Context, delivery string) error {
	args := []string{n.suite.Product.Agent,
		"--sysfs-root=" + n.SysfsRoot,
		"--dev-root=" + n.DevRoot,
		"--cdi-dir=" + n.CDIDir,
		"--kubelet-dir=" + DevicePluginDir,
		"--delivery=" + delivery,
		"--metrics-addr=",
		"--log-level=debug",
	}
	if n.ConfigPath != "" {
		args = append(args, "--config="+n.ConfigPath)
	}
	args = append(args, n.opts.AgentArgs...)
	p, err := startProc("agent", n.logPath("agent"), n.pidDir(), nil, args...)
	if err != nil {
		return err
	}
	n.agent = p
	n.delivery = delivery
	n.log.Logf("dri-cdi-agent started (pid %d, delivery %s)", p.Pid(), delivery)
	return nil
}

// StopAgent stops the agent with SIGTERM.
func (n *Node) StopAgent() { n.agent.Stop(syscall.SIGTERM, 10*time.Second) }

// KillAgent kills the agent with SIGKILL, as a crash would.
func (n *Node) KillAgent() { n.agent.Stop(syscall.SIGKILL, 10*time.Second) }

// RestartAgent stops the agent with SIGTERM and starts it again in the
// same delivery mode.
func (n *Node) RestartAgent(ctx context.Context) error {
	n.StopAgent()
	return n.StartAgent(ctx, n.delivery)
}

// AgentRunning reports whether the agent process is alive.
func (n *Node) AgentRunning() bool { return n.agent != nil && n.agent.Running() }

// StartNRI starts dri-cdi-nri against the node's containerd and kubelet.
func (n *Node) StartNRI(ctx context.Context) error {
	args := []string{n.suite.Product.NRI,
		"--nri-socket=" + n.NRISocket,
		"--sysfs-root=" + n.SysfsRoot,
		"--pod-resources-socket=" + n.PodResourcesSocket,
		"--cdi-dir=" + n.CDIDir,
		"--metrics-addr=",
		"--log-level=debug",
	}
	if n.ConfigPath != "" {
		args = append(args, "--config="+n.ConfigPath)
	}
	args = append(args, n.opts.NRIArgs...)
	connected := n.CountLog("containerd", nriConnected...)
	p, err := startProc("nri", n.logPath("nri"), n.pidDir(), nil, args...)
	if err != nil {
		return err
	}
	n.nri = p
	n.log.Logf("dri-cdi-nri started (pid %d)", p.Pid())
	// A pod created before the plugin connected would not see it.
	return p.waitReady(ctx, "dri-cdi-nri to connect to containerd", 30*time.Second, func() bool {
		return n.CountLog("containerd", nriConnected...) > connected
	})
}

// nriConnected matches containerd's log line for our NRI plugin having
// registered and synchronized.
var nriConnected = []string{"dri-cdi", "connected and synchronized"}

// NRIConnections counts how often the NRI plugin connected to containerd
// (across containerd restarts).
func (n *Node) NRIConnections() int { return n.CountLog("containerd", nriConnected...) }

// StopNRI stops the NRI plugin.
func (n *Node) StopNRI() { n.nri.Stop(syscall.SIGTERM, 10*time.Second) }

// RestartNRI stops the NRI plugin and starts it again; it returns once
// the plugin connected to containerd.
func (n *Node) RestartNRI(ctx context.Context) error {
	n.StopNRI()
	return n.StartNRI(ctx)
}

// NRIRunning reports whether the NRI plugin process is alive.
func (n *Node) NRIRunning() bool { return n.nri != nil && n.nri.Running() }
