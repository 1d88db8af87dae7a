package draapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kjson "sigs.k8s.io/json"
)

// strict decodes b into out as the API server does (case-sensitive),
// refusing fields out does not have.
func strict(t *testing.T, b []byte, out any) {
	t.Helper()
	strictErrs, err := kjson.UnmarshalStrict(b, out)
	require.NoError(t, err)
	require.Empty(t, strictErrs)
}

func q(s string) *resource.Quantity { v := resource.MustParse(s); return &v }

// A slice as the plugin writes it, every field set, is read by the real
// type without an unknown field and comes back the same: each name and
// JSON form of these types is the API's.
func TestWireForm(t *testing.T) {
	ours := ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "00000-dri-cdi.dev-node-a-x", GenerateName: "00000-dri-cdi.dev-node-a-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "u", Controller: ptr.To(true)}}},
		Spec: ResourceSliceSpec{
			Driver: "dri-cdi.dev", NodeName: ptr.To("node-a"),
			Pool: ResourcePool{Name: "node-a", Generation: 3, ResourceSliceCount: 2},
			Devices: []Device{{
				Name: "pci-0000-00-02-0",
				Attributes: map[QualifiedName]DeviceAttribute{
					"id": {StringValue: ptr.To("0000:00:02.0")}, "cardMinor": {IntValue: ptr.To(int64(0))},
					"displayOnly": {BoolValue: ptr.To(false)}, "v": {VersionValue: ptr.To("1.2.3")},
				},
				Capacity: map[QualifiedName]DeviceCapacity{"shares": {Value: resource.MustParse("4"), RequestPolicy: &CapacityRequestPolicy{
					Default: q("1"), ValidValues: []resource.Quantity{resource.MustParse("2")},
					ValidRange: &CapacityRequestPolicyRange{Min: q("1"), Max: q("4"), Step: q("1")},
				}}},
				Taints:                   []DeviceTaint{{Key: "dri-cdi.dev/unavailable", Value: "x", Effect: DeviceTaintEffectNoSchedule, TimeAdded: &metav1.Time{Time: time.Unix(1e9, 0).UTC()}}},
				AllowMultipleAllocations: ptr.To(true),
			}},
		},
	}
	b, err := json.Marshal(&ours)
	require.NoError(t, err)
	var real resourcev1.ResourceSlice
	strict(t, b, &real)
	v := real.Spec.Devices[0].Capacity["shares"].Value
	require.Equal(t, "4", v.String())
	require.Equal(t, resourcev1.DeviceTaintEffectNoSchedule, real.Spec.Devices[0].Taints[0].Effect)
	require.Equal(t, int64(2), real.Spec.Pool.ResourceSliceCount)
	back, err := json.Marshal(&real)
	require.NoError(t, err)
	var again ResourceSlice
	strict(t, back, &again)
	require.JSONEq(t, string(b), string(back))

	// A claim's allocation, every field this package reads set, as the
	// real type writes it.
	share := types.UID("share-1")
	claim := resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "uid-c"},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: "dri-cdi.dev", Pool: "node-a", Device: "pci-0000-00-02-0",
				AdminAccess: ptr.To(true), ShareID: &share,
				ConsumedCapacity: map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse("2Gi")},
			}},
			Config: []resourcev1.DeviceAllocationConfiguration{{Source: resourcev1.AllocationConfigSourceClaim, Requests: []string{"gpu"},
				DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: "dri-cdi.dev"}}}},
		}}},
	}
	b, err = json.Marshal(&claim)
	require.NoError(t, err)
	var got ResourceClaim
	_, err = kjson.UnmarshalStrict(b, &got) // unknown fields are fine here: a subset
	require.NoError(t, err)
	var spelled ResourceClaim
	strictErrs, _ := kjson.UnmarshalStrict([]byte(`{"status":{"allocation":{"devices":{"results":[{"shareID":"x","consumedCapacity":{},"adminAccess":true}]}}}}`), &spelled)
	require.Empty(t, strictErrs, "the fields read are spelled as the API spells them")
	r := got.Status.Allocation.Devices.Results[0]
	require.Equal(t, DeviceRequestAllocationResult{Request: "gpu", Driver: "dri-cdi.dev", Pool: "node-a", Device: "pci-0000-00-02-0",
		AdminAccess: ptr.To(true), ShareID: &share, ConsumedCapacity: map[QualifiedName]resource.Quantity{"memory": resource.MustParse("2Gi")}}, r)
	cfg := got.Status.Allocation.Devices.Config[0]
	require.Equal(t, AllocationConfigSource("FromClaim"), cfg.Source)
	require.Equal(t, []string{"gpu"}, cfg.Requests)
	require.Equal(t, "dri-cdi.dev", cfg.Opaque.Driver)
	require.Equal(t, types.UID("uid-c"), got.UID)
}
