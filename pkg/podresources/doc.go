// Package podresources is a client of the kubelet PodResources API (v1),
// the only source dri-cdi-nri trusts for which devices the kubelet
// allocated to a container.
//
// # Connection
//
// A Client holds one gRPC connection to the kubelet's unix socket for its
// whole life. The connection is dialed lazily on the first call and
// re-established by gRPC when the kubelet restarts; a call made while the
// kubelet is down fails fast with an error wrapping ErrUnavailable
// instead of waiting for it.
//
// # Get and List
//
// ContainerDevices asks the kubelet with Get (one pod). Kubelets that do
// not implement Get, or have the KubeletPodResourcesGet feature gate
// disabled, are asked with List instead, and the client remembers to
// skip Get from then on.
//
// # Example
//
//	c, err := podresources.New("/var/lib/kubelet/pod-resources/kubelet.sock")
//	if err != nil { ... }
//	defer c.Close()
//	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
//	defer cancel()
//	devs, err := c.ContainerDevices(ctx, "default", "my-pod", "app")
//	// devs["dri-cdi.dev/i915"] == []string{"0000:00:02.0"}
package podresources
