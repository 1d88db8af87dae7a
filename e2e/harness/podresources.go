package harness

import (
	"context"
	"fmt"
	"sort"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

func (n *Node) podResources(ctx context.Context, f func(context.Context, podresourcesv1.PodResourcesListerClient) error) error {
	conn, err := grpc.NewClient("unix://"+n.PodResourcesSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("podresources %s: %w", n.PodResourcesSocket, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return f(ctx, podresourcesv1.NewPodResourcesListerClient(conn))
}

// Allocatable returns the device IDs the kubelet reports as allocatable
// for a resource (GetAllocatableResources), sorted.
func (n *Node) Allocatable(ctx context.Context, resource string) ([]string, error) {
	var ids []string
	err := n.podResources(ctx, func(ctx context.Context, c podresourcesv1.PodResourcesListerClient) error {
		resp, err := c.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
		if err != nil {
			return fmt.Errorf("podresources GetAllocatableResources: %w", err)
		}
		ids = deviceIDs(resp.GetDevices(), resource)
		return nil
	})
	sort.Strings(ids)
	return ids, err
}

// WaitAllocatable waits until the resource has at least min allocatable
// devices and returns them.
func (n *Node) WaitAllocatable(ctx context.Context, resource string, min int, timeout time.Duration) ([]string, error) {
	ids, err := n.waitAllocatable(ctx, resource, timeout, func(ids []string) bool { return len(ids) >= min })
	if err != nil {
		return ids, fmt.Errorf("resource %s: want %d allocatable devices, have %v: %w", resource, min, ids, err)
	}
	return ids, nil
}

// WaitAllocatableExactly waits until the resource's allocatable device
// IDs are exactly want (sorted).
func (n *Node) WaitAllocatableExactly(ctx context.Context, resource string, want []string, timeout time.Duration) error {
	want = append([]string(nil), want...)
	sort.Strings(want)
	ids, err := n.waitAllocatable(ctx, resource, timeout, func(ids []string) bool { return fmt.Sprint(ids) == fmt.Sprint(want) })
	if err != nil {
		return fmt.Errorf("resource %s: want allocatable %v, have %v: %w", resource, want, ids, err)
	}
	return nil
}

// waitAllocatable polls the resource's allocatable device IDs until ok
// holds for them, and returns the last ones it saw.
func (n *Node) waitAllocatable(ctx context.Context, resource string, timeout time.Duration, ok func(ids []string) bool) ([]string, error) {
	var ids []string
	err := poll(ctx, timeout, func() (bool, error) {
		var err error
		ids, err = n.Allocatable(ctx, resource)
		return err == nil && ok(ids), nil
	})
	return ids, err
}

// deviceIDs are the IDs of the devices of resource among devs.
func deviceIDs(devs []*podresourcesv1.ContainerDevices, resource string) []string {
	var ids []string
	for _, d := range devs {
		if d.GetResourceName() == resource {
			ids = append(ids, d.GetDeviceIds()...)
		}
	}
	return ids
}

// Allocated returns the device IDs the kubelet reports (List) as
// allocated to the pod's main container for a resource.
func (n *Node) Allocated(ctx context.Context, podName, resource string) ([]string, error) {
	full := podName + "-" + NodeName
	var ids []string
	err := n.podResources(ctx, func(ctx context.Context, c podresourcesv1.PodResourcesListerClient) error {
		resp, err := c.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
		if err != nil {
			return fmt.Errorf("podresources List: %w", err)
		}
		for _, p := range resp.GetPodResources() {
			if p.GetName() != full {
				continue
			}
			for _, ctr := range p.GetContainers() {
				if ctr.GetName() != ContainerName {
					continue
				}
				ids = append(ids, deviceIDs(ctr.GetDevices(), resource)...)
			}
		}
		return nil
	})
	sort.Strings(ids)
	return ids, err
}

// ListAllocations returns the device IDs the kubelet reports (List) for
// a resource, by "namespace/pod/container", for every container it lists
// (with no IDs when the container has none of the resource).
func (n *Node) ListAllocations(ctx context.Context, resource string) (map[string][]string, error) {
	out := map[string][]string{}
	err := n.podResources(ctx, func(ctx context.Context, c podresourcesv1.PodResourcesListerClient) error {
		resp, err := c.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
		if err != nil {
			return fmt.Errorf("podresources List: %w", err)
		}
		for _, p := range resp.GetPodResources() {
			for _, ctr := range p.GetContainers() {
				out[p.GetNamespace()+"/"+p.GetName()+"/"+ctr.GetName()] = deviceIDs(ctr.GetDevices(), resource)
			}
		}
		return nil
	})
	return out, err
}
