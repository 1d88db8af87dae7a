package podresources

import (
	"context"

	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// ClaimDevice is one device of a DRA ResourceClaim that the kubelet
// prepared for a container, as PodResources reports it in the container's
// DynamicResources.
type ClaimDevice struct {
	// Claim and Namespace name the ResourceClaim.
	Claim, Namespace string
	// Driver, Pool and Device name the allocated device in its
	// ResourceSlice.
	Driver, Pool, Device string
	// ShareID is the scheduler's ID of the allocation when it is a share
	// of a device (DRA consumable capacity); empty otherwise.
	ShareID string
	// CDIDevices are the fully qualified CDI device names the driver's
	// NodePrepareResources returned for the device; the kubelet hands the
	// same names to the runtime.
	CDIDevices []string
}

// Allocation is everything the kubelet allocated to one container:
// device-plugin devices and DRA claim devices.
type Allocation struct {
	// Devices are the device-plugin device IDs, by resource name.
	Devices map[string][]string
	// Claims are the devices of the container's DRA claims, in the
	// kubelet's order.
	Claims []ClaimDevice
}

// ContainerAllocation returns what the kubelet allocated to one
// container, device plugins and DRA claims together, with one call. Its
// errors are those of ContainerDevices.
func (c *Client) ContainerAllocation(ctx context.Context, namespace, pod, container string) (Allocation, error) {
	res, err := c.podResources(ctx, namespace, pod)
	if err != nil {
		return Allocation{}, err
	}
	devices, err := containerDevices(res, namespace, pod, container)
	if err != nil {
		return Allocation{}, err
	}
	return Allocation{Devices: devices, Claims: containerClaims(res, container)}, nil
}

// containerClaims flattens the DynamicResources of the named container.
// The container exists: containerDevices found it.
func containerClaims(res *v1.PodResources, container string) []ClaimDevice {
	for _, ctr := range res.GetContainers() {
		if ctr.GetName() == container {
			return claimDevices(ctr)
		}
	}
	return nil
}

// claimDevices flattens the DynamicResources of one container.
func claimDevices(ctr *v1.ContainerResources) []ClaimDevice {
	var out []ClaimDevice
	for _, dr := range ctr.GetDynamicResources() {
		for _, cr := range dr.GetClaimResources() {
			d := ClaimDevice{
				Claim:     dr.GetClaimName(),
				Namespace: dr.GetClaimNamespace(),
				Driver:    cr.GetDriverName(),
				Pool:      cr.GetPoolName(),
				Device:    cr.GetDeviceName(),
				ShareID:   cr.GetShareId(),
			}
			for _, cdi := range cr.GetCdiDevices() {
				d.CDIDevices = append(d.CDIDevices, cdi.GetName())
			}
			out = append(out, d)
		}
	}
	return out
}

// ContainerClaims are the DRA claim devices of one container of the
// node.
type ContainerClaims struct {
	// Namespace, Pod and Container name the container.
	Namespace, Pod, Container string
	// Claims are its claims' devices, in the kubelet's order.
	Claims []ClaimDevice
}

// NodeClaims lists, with one List call within the client's timeout, the
// DRA claim devices of every container of the node that has any, in the
// kubelet's order. It is for readers off the container-creation path
// (the usage scans of dri-cdi-dra); a call the kubelet's rate limit
// rejects is not retried, the caller asks again later.
func (c *Client) NodeClaims(ctx context.Context) ([]ContainerClaims, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rsp, err := c.api.List(ctx, &v1.ListPodResourcesRequest{})
	if err != nil {
		return nil, c.callFailed("List", err)
	}
	var out []ContainerClaims
	for _, p := range rsp.GetPodResources() {
		for _, ctr := range p.GetContainers() {
			if claims := claimDevices(ctr); len(claims) > 0 {
				out = append(out, ContainerClaims{Namespace: p.GetNamespace(), Pod: p.GetName(), Container: ctr.GetName(), Claims: claims})
			}
		}
	}
	return out, nil
}
