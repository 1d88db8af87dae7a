package podresourcestest

import "context"

// Fixed answers every container with the same allocation (resource name
// to device IDs), in process. It has the method of podresources.Client
// that the NRI plugin asks (nri.Authorizer), so that benchmarks measure
// the handler without a kubelet round trip.
type Fixed map[string][]string

// ContainerDevices returns f, whoever asks.
func (f Fixed) ContainerDevices(context.Context, string, string, string) (map[string][]string, error) {
	return f, nil
}
