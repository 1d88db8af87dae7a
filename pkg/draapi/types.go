// Package draapi is the part of the resource.k8s.io/v1 API that
// dri-cdi-dra reads and writes: ResourceSlices it publishes and the
// allocation of the ResourceClaims it prepares, with the API's own
// names, fields and JSON form, and a client for them built on
// k8s.io/client-go/rest alone.
//
// Why not k8s.io/api/resource/v1 and client-go's clientset: importing
// those keeps every built-in API group's types in the binary (the
// clientset's scheme registers them all, and resource/v1 refers to
// core/v1), about 8 MB of a plugin whose work needs a dozen structs.
// These types are a subset: a field dri-cdi-dra does not model is
// ignored when read, and never written. TestWireForm checks both
// directions against the real types.
package draapi

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Group and version of the API.
const (
	Group   = "resource.k8s.io"
	Version = "v1"
)

// ResourceSliceMaxDevices is the most devices one ResourceSlice may hold.
const ResourceSliceMaxDevices = 128

// Field selectors of ResourceSlices.
const (
	ResourceSliceSelectorNodeName = "spec.nodeName"
	ResourceSliceSelectorDriver   = "spec.driver"
)

// QualifiedName is an attribute or capacity name, "<domain>/<id>" or an
// id of the driver's domain.
type QualifiedName string

// ResourceSlice is one slice of a driver's pool of devices.
type ResourceSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ResourceSliceSpec `json:"spec"`
}

// ResourceSliceList is a list of slices.
type ResourceSliceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceSlice `json:"items"`
}

// ResourceSliceSpec is a slice's content.
type ResourceSliceSpec struct {
	Driver   string       `json:"driver"`
	Pool     ResourcePool `json:"pool"`
	NodeName *string      `json:"nodeName,omitempty"`
	Devices  []Device     `json:"devices,omitempty"`
}

// ResourcePool names the pool a slice belongs to, its generation and
// how many slices it has.
type ResourcePool struct {
	Name               string `json:"name"`
	Generation         int64  `json:"generation"`
	ResourceSliceCount int64  `json:"resourceSliceCount"`
}

// Device is one device of a slice.
type Device struct {
	Name                     string                            `json:"name"`
	Attributes               map[QualifiedName]DeviceAttribute `json:"attributes,omitempty"`
	Capacity                 map[QualifiedName]DeviceCapacity  `json:"capacity,omitempty"`
	Taints                   []DeviceTaint                     `json:"taints,omitempty"`
	AllowMultipleAllocations *bool                             `json:"allowMultipleAllocations,omitempty"`
}

// DeviceAttribute holds exactly one value.
type DeviceAttribute struct {
	IntValue     *int64  `json:"int,omitempty"`
	BoolValue    *bool   `json:"bool,omitempty"`
	StringValue  *string `json:"string,omitempty"`
	VersionValue *string `json:"version,omitempty"`
}

// DeviceCapacity is an amount of a device, and how claims consume it.
type DeviceCapacity struct {
	Value         resource.Quantity      `json:"value"`
	RequestPolicy *CapacityRequestPolicy `json:"requestPolicy,omitempty"`
}

// CapacityRequestPolicy is what a claim may ask for of a capacity.
type CapacityRequestPolicy struct {
	Default     *resource.Quantity          `json:"default"`
	ValidValues []resource.Quantity         `json:"validValues,omitempty"`
	ValidRange  *CapacityRequestPolicyRange `json:"validRange,omitempty"`
}

// CapacityRequestPolicyRange bounds the amounts a claim may ask for.
type CapacityRequestPolicyRange struct {
	Min  *resource.Quantity `json:"min,omitempty"`
	Max  *resource.Quantity `json:"max,omitempty"`
	Step *resource.Quantity `json:"step,omitempty"`
}

// DeviceTaintEffect is what a taint does to claims that do not tolerate it.
type DeviceTaintEffect string

// DeviceTaintEffectNoSchedule keeps new claims off the device.
const DeviceTaintEffectNoSchedule DeviceTaintEffect = "NoSchedule"

// DeviceTaint is a taint of a device. The API server sets TimeAdded.
type DeviceTaint struct {
	Key       string            `json:"key"`
	Value     string            `json:"value,omitempty"`
	Effect    DeviceTaintEffect `json:"effect"`
	TimeAdded *metav1.Time      `json:"timeAdded,omitempty"`
}

// ResourceClaim is a claim, as far as its allocation goes.
type ResourceClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            ResourceClaimStatus `json:"status,omitempty"`
}

// ResourceClaimStatus is a claim's status.
type ResourceClaimStatus struct {
	Allocation *AllocationResult `json:"allocation,omitempty"`
}

// AllocationResult is what the scheduler allocated to a claim.
type AllocationResult struct {
	Devices DeviceAllocationResult `json:"devices,omitempty"`
}

// DeviceAllocationResult lists the allocated devices and their
// configuration.
type DeviceAllocationResult struct {
	Results []DeviceRequestAllocationResult `json:"results,omitempty"`
	Config  []DeviceAllocationConfiguration `json:"config,omitempty"`
}

// DeviceRequestAllocationResult is one allocated device.
type DeviceRequestAllocationResult struct {
	Request          string                              `json:"request"`
	Driver           string                              `json:"driver"`
	Pool             string                              `json:"pool"`
	Device           string                              `json:"device"`
	AdminAccess      *bool                               `json:"adminAccess,omitempty"`
	ShareID          *types.UID                          `json:"shareID,omitempty"`
	ConsumedCapacity map[QualifiedName]resource.Quantity `json:"consumedCapacity,omitempty"`
}

// AllocationConfigSource says where a configuration came from.
type AllocationConfigSource string

// DeviceAllocationConfiguration is a configuration of some requests.
type DeviceAllocationConfiguration struct {
	Source              AllocationConfigSource `json:"source"`
	Requests            []string               `json:"requests,omitempty"`
	DeviceConfiguration `json:",inline"`
}

// DeviceConfiguration is a driver's configuration.
type DeviceConfiguration struct {
	Opaque *OpaqueDeviceConfiguration `json:"opaque,omitempty"`
}

// OpaqueDeviceConfiguration is configuration only its driver reads.
type OpaqueDeviceConfiguration struct {
	Driver     string          `json:"driver"`
	Parameters json.RawMessage `json:"parameters"`
}
