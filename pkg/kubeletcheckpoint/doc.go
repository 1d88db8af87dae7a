// Package kubeletcheckpoint reads the kubelet device manager's checkpoint,
// <device-plugins dir>/kubelet_internal_checkpoint, to tell which device
// IDs the kubelet allocated to a container of a pod, keyed by the pod's
// UID.
//
// # Why
//
// The kubelet PodResources API does not report regular init containers
// (kubelet v1.37 pkg/kubelet/apis/podresources/server_v1.go skips every
// init container that is not restartable), but the device manager
// allocates devices to them at pod admission and records every
// allocation, init containers included, in this checkpoint before any
// container of the pod is created (devicemanager allocateContainerResources
// ends with writeCheckpoint). The NRI plugin uses it as the fallback source
// of truth for a container PodResources does not know.
//
// # Format
//
// The file is JSON written by the kubelet
// (pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go):
//
//	{"Data": {"PodDeviceEntries": [{"PodUID": "...", "ContainerName": "...",
//	  "ResourceName": "...", "DeviceIDs": {"<NUMA node>": ["id", ...]},
//	  "AllocResp": "<base64>"}], "RegisteredDevices": {"res": ["id"]}},
//	 "Checksum": 123}
//
// Only PodUID, ContainerName, ResourceName and DeviceIDs are used; unknown
// fields are ignored so that newer kubelets (which add fields such as
// BootID) still parse. The checksum is not verified: the kubelet computes
// it as a hash of a Go-specific dump of its own structs, which cannot be
// recomputed without the kubelet's code. The file lives in a root-only
// directory and the kubelet replaces it by rename, so a reader sees a
// whole file.
//
// # Example
//
//	r := kubeletcheckpoint.NewReader(kubeletcheckpoint.DefaultPath)
//	devs, err := r.ContainerDevices(ctx, string(pod.UID), "init")
//	// devs["dri-cdi.dev/i915"] == []string{"0000:00:02.0"}
package kubeletcheckpoint
