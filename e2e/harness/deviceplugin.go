package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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

// Registrations is the kubelet's count of device plugin registrations for
// a resource since the kubelet started.
func (n *Node) Registrations(ctx context.Context, resource string) (int, error) {
	v, err := n.KubeletMetric(ctx, "kubelet_device_plugin_registration_total", "resource_name", resource)
	return int(v), err
}

// WaitRegistrations waits until Registrations reaches min.
func (n *Node) WaitRegistrations(ctx context.Context, resource string, min int, timeout time.Duration) error {
	var have int
	err := poll(ctx, timeout, func() (bool, error) {
		v, err := n.Registrations(ctx, resource)
		have = v
		return err == nil && v >= min, nil
	})
	if err != nil {
		return fmt.Errorf("resource %s: want %d plugin registrations, have %d: %w", resource, min, have, err)
	}
	return nil
}

// KubeletCheckpointAllocations returns the device IDs of a resource in
// the kubelet's device-manager checkpoint, by "pod UID/container": the
// kubelet's own record, which, unlike PodResources, covers regular init
// containers.
func KubeletCheckpointAllocations(resource string) (map[string][]string, error) {
	raw, err := os.ReadFile(filepath.Join(DevicePluginDir, "kubelet_internal_checkpoint"))
	if err != nil {
		return nil, fmt.Errorf("kubelet checkpoint: %w", err)
	}
	var cp struct {
		Data struct {
			PodDeviceEntries []struct {
				PodUID        string              `json:"PodUID"`
				ContainerName string              `json:"ContainerName"`
				ResourceName  string              `json:"ResourceName"`
				DeviceIDs     map[string][]string `json:"DeviceIDs"`
			} `json:"PodDeviceEntries"`
		} `json:"Data"`
	}
	if err := json.Unmarshal(raw, &cp); err != nil {
		return nil, fmt.Errorf("kubelet checkpoint: %w", err)
	}
	out := map[string][]string{}
	for _, e := range cp.Data.PodDeviceEntries {
		if e.ResourceName != resource {
			continue
		}
		key := e.PodUID + "/" + e.ContainerName
		for _, ids := range e.DeviceIDs {
			out[key] = append(out[key], ids...)
		}
	}
	return out, nil
}
