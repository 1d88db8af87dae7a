package dra

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
)

// The first slice: why the plugin creates it itself.
//
// The helper's ResourceSlice controller (k8s.io/dynamic-resource-
// allocation/resourceslice) starts on the first PublishResources and
// waits for its informer to sync before it publishes anything, checking
// every second (initInformer polls HasSynced with time.After(time.Second),
// and the first check comes right after the informer started): a fresh
// plugin's slice appeared a second after its start, however fast the API
// server answered. None of the controller's options changes that poll.
//
// So, before the first PublishResources, a node with no slice of this
// driver gets its slice created directly, in the form the controller
// would create it: the name prefix of slice index 0 ("00000-<driver>-
// <node>-", the API server adds the suffix), the Node as controlling
// owner, the pool named after the node with generation 1 and one slice.
// The controller's informer then lists that slice, finds it equal to
// what it was handed, and makes no API call (TestFirstSliceIsKeptByTheController
// runs the real controller against it). A node that already has a slice of
// this driver (a restart) is left to the controller, which updates it.

// firstSliceName is the GenerateName of the controller's slice index 0
// of a one-slice pool: the index in resourceSliceIndexMinLength (5) hex
// digits, the driver and the owner's name, each followed by "-".
func firstSliceName(nodeName string) string {
	return fmt.Sprintf("%05x-%s-%s-", 0, DriverName, nodeName)
}

// createFirstSlice creates the node's slice of devices unless a slice of
// this driver for the node exists. It returns the created slice's name,
// "" when it created none.
func (d *Driver) createFirstSlice(ctx context.Context, devices []resourceapi.Device) (string, error) {
	c, nodeName := d.opts.KubeClient, d.opts.NodeName
	list, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		resourceapi.ResourceSliceSelectorDriver:   DriverName,
		resourceapi.ResourceSliceSelectorNodeName: nodeName,
	}.String()})
	if err != nil {
		return "", fmt.Errorf("list the node's ResourceSlices: %w", err)
	}
	if len(list.Items) > 0 {
		return "", nil
	}
	node, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get node %q: %w", nodeName, err)
	}
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: firstSliceName(nodeName),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: nodeName, UID: node.UID, Controller: ptr.To(true),
			}},
		},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   DriverName,
			Pool:     resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(nodeName),
			Devices:  devices,
		},
	}
	created, err := c.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create the node's ResourceSlice: %w", err)
	}
	return created.Name, nil
}
