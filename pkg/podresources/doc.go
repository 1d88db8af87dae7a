// Package podresources is a client of the kubelet PodResources API (v1),
// the only source dri-cdi-nri trusts for which devices the kubelet
// allocated to a container.
//
// # Connection
//
// A Client holds one gRPC connection to the kubelet's unix socket for its
// whole life. The connection is dialed lazily on the first call and
// re-established by gRPC when the kubelet restarts; a call made while the
// kubelet is down fails fast with gRPC's Unavailable status instead of
// waiting for it, and asks gRPC to reconnect right away.
//
// # Get and List
//
// ContainerAllocation (device-plugin devices and DRA claim devices, what
// the NRI plugin asks) and ContainerDevices (device-plugin devices only)
// ask the kubelet with Get (one pod). Kubelets that do not implement Get,
// or have the KubeletPodResourcesGet feature gate disabled, are asked with
// List instead, and the client remembers to skip Get from then on. A call
// the kubelet's rate limit rejects is retried after a short backoff
// (pkg/backoff) until the client's timeout.
//
// # The node's claims
//
// NodeClaims lists, with one List call and no retry, the DRA claim
// devices (and share IDs) of every container of the node: for readers off
// the container-creation path, such as dri-cdi-dra's usage scans.
//
// # Example
//
//	c, err := podresources.New("/var/lib/kubelet/pod-resources/kubelet.sock")
//	if err != nil { ... }
//	defer c.Close()
//	a, err := c.ContainerAllocation(ctx, "default", "my-pod", "app")
//	// a.Devices["dri-cdi.dev/i915"] == []string{"0000:00:02.0"}
//	// a.Claims: the container's DRA claim devices, with their CDI names
package podresources
