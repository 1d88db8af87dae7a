package podresourcestest

import (
	"context"

	"github.com/dri-cdi/dri-cdi/pkg/podresources"
)

// Fixed answers every container with the same device-plugin allocation
// (resource name to device IDs) and no DRA claims, in process. It has the
// method of podresources.Client that the NRI plugin asks (nri.Authorizer),
// so that benchmarks measure the handler without a kubelet round trip.
type Fixed map[string][]string

// ContainerAllocation returns f as the device-plugin devices, whoever
// asks.
func (f Fixed) ContainerAllocation(context.Context, string, string, string) (podresources.Allocation, error) {
	return podresources.Allocation{Devices: f}, nil
}
