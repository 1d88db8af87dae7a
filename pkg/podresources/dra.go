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
	var out []ClaimDevice
	for _, ctr := range res.GetContainers() {
		if ctr.GetName() != container {
			continue
		}
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
	return nil
}
