package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// DeviceHealth connects to the agent's device plugin socket of a
// resource, as the kubelet does, and returns the device list of the first
// ListAndWatch message: device ID -> Healthy or Unhealthy.
func (n *Node) DeviceHealth(ctx context.Context, resource string) (map[string]string, error) {
	name := strings.NewReplacer("/", "_").Replace(resource)
	socks, err := filepath.Glob(filepath.Join(DevicePluginDir, "dri-cdi-"+name+"-*.sock"))
	if err != nil || len(socks) != 1 {
		return nil, fmt.Errorf("device plugin socket of %s: want one, have %v (%v)", resource, socks, err)
	}
	conn, err := grpc.NewClient("unix://"+socks[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", socks[0], err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	stream, err := pluginapi.NewDevicePluginClient(conn).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		return nil, fmt.Errorf("ListAndWatch %s: %w", socks[0], err)
	}
	msg, err := stream.Recv()
	if err != nil {
		return nil, fmt.Errorf("ListAndWatch %s: %w", socks[0], err)
	}
	out := map[string]string{}
	for _, d := range msg.Devices {
		out[d.ID] = d.Health
	}
	return out, nil
}

// WaitDeviceHealth waits until the device plugin lists device id of
// resource with health (pluginapi.Healthy or pluginapi.Unhealthy).
func (n *Node) WaitDeviceHealth(ctx context.Context, resource, id, health string, timeout time.Duration) error {
	var last map[string]string
	err := poll(ctx, timeout, func() (bool, error) {
		h, err := n.DeviceHealth(ctx, resource)
		if err != nil {
			return false, nil
		}
		last = h
		return h[id] == health, nil
	})
	if err != nil {
		return fmt.Errorf("device %s of %s: want %s, last list %v: %w", id, resource, health, last, err)
	}
	return nil
}

// StopContainer stops a container through CRI with no grace period, as
// a crash of its process would end it; the kubelet then restarts it
// when the pod's restartPolicy says so.
func (n *Node) StopContainer(ctx context.Context, id string) error {
	_, err := n.Crictl(ctx, "stop", "--timeout", "0", id)
	return err
}

// Containers returns every container of the pod's main container, all
// attempts, newest first.
func (n *Node) Containers(ctx context.Context, podName string) ([]Container, error) {
	full := podName + "-" + NodeName
	out, err := n.Crictl(ctx, "ps", "-a", "-q", "--label", "io.kubernetes.pod.name="+full, "--label", "io.kubernetes.container.name="+ContainerName)
	if err != nil {
		return nil, err
	}
	var cs []Container
	for _, id := range strings.Fields(out) {
		cs = append(cs, Container{ID: id, PodName: full})
	}
	return cs, nil
}
