package deviceplugin

import (
	"testing"

	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

func testName(id string) string { return "dri-cdi.dev/gpu=" + id }

// testCard returns a card with card and render nodes, minors from n.
func testCard(id string, n uint32, numa int) drm.Card {
	card := drm.DeviceNode{Path: "/dev/dri/card" + itoa(n), HostPath: "/host/dev/dri/card" + itoa(n), Major: 226, Minor: n, Mode: 0o660}
	render := drm.DeviceNode{Path: "/dev/dri/renderD" + itoa(128+n), HostPath: "/host/dev/dri/renderD" + itoa(128+n), Major: 226, Minor: 128 + n, Mode: 0o660}
	return drm.Card{ID: id, Name: "card" + itoa(n), Driver: "i915", Bus: "pci", PCIAddress: id, VendorID: "8086", DeviceID: "56a0",
		NUMANode: numa, SysfsPath: "/sys/devices/pci0000:00/" + id, CardNode: card, RenderNode: &render}
}

func itoa(n uint32) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func ids(devs []*pluginapi.Device) []string {
	out := make([]string, 0, len(devs))
	for _, d := range devs {
		out = append(out, d.ID)
	}
	return out
}

func TestBuildState(t *testing.T) {
	a, b := testCard("0000:03:00.0", 0, 1), testCard("0000:00:02.0", 1, -1)
	tests := map[string]struct {
		pool      config.Pool
		unhealthy map[string]bool
		wantIDs   []string
		check     func(t *testing.T, st *state)
	}{
		"card IDs, sorted, with topology when known": {
			pool:    config.Pool{Resource: "dri-cdi.dev/i915", Replicas: 1, Cards: []drm.Card{a, b}},
			wantIDs: []string{"0000:00:02.0", "0000:03:00.0"},
			check: func(t *testing.T, st *state) {
				require.Nil(t, st.list.Devices[0].Topology)
				require.Equal(t, &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: 1}}}, st.list.Devices[1].Topology)
				require.Equal(t, pluginapi.Healthy, st.list.Devices[0].Health)
			},
		},
		"replicas in numeric order": {
			pool:    config.Pool{Resource: "dri-cdi.dev/i915", Replicas: 11, Cards: []drm.Card{a}},
			wantIDs: []string{"0000:03:00.0::0", "0000:03:00.0::1", "0000:03:00.0::2", "0000:03:00.0::3", "0000:03:00.0::4", "0000:03:00.0::5", "0000:03:00.0::6", "0000:03:00.0::7", "0000:03:00.0::8", "0000:03:00.0::9", "0000:03:00.0::10"},
		},
		"unhealthy card marks every replica": {
			pool:      config.Pool{Resource: "dri-cdi.dev/i915", Replicas: 2, Cards: []drm.Card{a, b}},
			unhealthy: map[string]bool{a.ID: true},
			wantIDs:   []string{"0000:00:02.0::0", "0000:00:02.0::1", "0000:03:00.0::0", "0000:03:00.0::1"},
			check: func(t *testing.T, st *state) {
				h := map[string]string{}
				for _, d := range st.list.Devices {
					h[d.ID] = d.Health
				}
				require.Equal(t, map[string]string{
					"0000:00:02.0::0": pluginapi.Healthy, "0000:00:02.0::1": pluginapi.Healthy,
					"0000:03:00.0::0": pluginapi.Unhealthy, "0000:03:00.0::1": pluginapi.Unhealthy,
				}, h)
			},
		},
		"no cards is an empty, non-nil list": {
			pool:    config.Pool{Resource: "dri-cdi.dev/i915", Replicas: 1},
			wantIDs: []string{},
			check:   func(t *testing.T, st *state) { require.NotNil(t, st.list.Devices) },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := buildState(tc.pool, tc.unhealthy, DeliveryCDICRI, testName)
			require.Equal(t, tc.wantIDs, ids(st.list.Devices))
			for _, id := range tc.wantIDs {
				card, _, err := alloc.ParseDeviceID(id)
				require.NoError(t, err)
				require.Equal(t, card, st.devices[id].card.id)
			}
			if tc.check != nil {
				tc.check(t, st)
			}
		})
	}
}

func TestAllocate(t *testing.T) {
	a, b := testCard("0000:03:00.0", 0, 0), testCard("0000:00:02.0", 1, 0)
	b.ByPath = []drm.DeviceNode{{Path: "/dev/dri/by-path/pci-0000:00:02.0-render", HostPath: "/host/dev/dri/by-path/pci-0000:00:02.0-render", Major: 226, Minor: 129}}
	kfd := drm.DeviceNode{Path: "/dev/kfd", HostPath: "/host/dev/kfd", Major: 235, Minor: 0}
	a.Extra, b.Extra = []drm.DeviceNode{kfd}, []drm.DeviceNode{kfd}
	res := "dri-cdi.dev/i915"
	one := config.Pool{Resource: res, Replicas: 1, Cards: []drm.Card{a, b}}
	shared := config.Pool{Resource: res, Replicas: 2, Cards: []drm.Card{a, b}}
	sharedOK := shared
	sharedOK.AllowSameCardReplicas = true
	annot := func(ids ...string) map[string]string {
		k, v := alloc.Annotation(res, ids)
		return map[string]string{k: v}
	}
	rw := func(c, h string) *pluginapi.DeviceSpec {
		return &pluginapi.DeviceSpec{ContainerPath: c, HostPath: h, Permissions: "rw"}
	}
	npu := drm.Card{ID: "0000:00:0b.0", Name: "accel0", Driver: "intel_vpu", NUMANode: -1,
		AccelNode: &drm.DeviceNode{Path: "/dev/accel/accel0", HostPath: "/host/dev/accel/accel0", Major: drm.AccelMajor, Minor: 0}}
	npuPool := config.Pool{Resource: "dri-cdi.dev/intel_vpu", Replicas: 1, Cards: []drm.Card{npu}}
	npuAnnotK, npuAnnotV := alloc.Annotation(npuPool.Resource, []string{npu.ID})

	tests := map[string]struct {
		pool      config.Pool
		unhealthy map[string]bool
		delivery  Delivery
		ids       []string
		want      *pluginapi.ContainerAllocateResponse
		wantErr   error
	}{
		"cdi-cri: names sorted by card, annotation": {
			pool: one, delivery: DeliveryCDICRI, ids: []string{a.ID, b.ID},
			want: &pluginapi.ContainerAllocateResponse{
				Annotations: annot(a.ID, b.ID),
				CdiDevices:  []*pluginapi.CDIDevice{{Name: "dri-cdi.dev/gpu=0000:00:02.0"}, {Name: "dri-cdi.dev/gpu=0000:03:00.0"}},
			},
		},
		"nri: annotation only": {
			pool: one, delivery: DeliveryNRI, ids: []string{b.ID},
			want: &pluginapi.ContainerAllocateResponse{Annotations: annot(b.ID)},
		},
		"device-specs: every node rw, by its by-path link where it has one, shared node once": {
			pool: one, delivery: DeliveryDeviceSpecs, ids: []string{a.ID, b.ID},
			want: &pluginapi.ContainerAllocateResponse{
				Annotations: annot(a.ID, b.ID),
				Devices: []*pluginapi.DeviceSpec{
					rw("/dev/dri/card1", "/host/dev/dri/card1"),
					rw("/dev/dri/renderD129", "/host/dev/dri/by-path/pci-0000:00:02.0-render"),
					rw("/dev/kfd", "/host/dev/kfd"),
					rw("/dev/dri/by-path/pci-0000:00:02.0-render", "/host/dev/dri/by-path/pci-0000:00:02.0-render"),
					rw("/dev/dri/card0", "/host/dev/dri/card0"),
					rw("/dev/dri/renderD128", "/host/dev/dri/renderD128"),
				},
			},
		},
		"device-specs: an accel device hands over its accel node alone": {
			pool: npuPool, delivery: DeliveryDeviceSpecs, ids: []string{npu.ID},
			want: &pluginapi.ContainerAllocateResponse{
				Annotations: map[string]string{npuAnnotK: npuAnnotV},
				Devices:     []*pluginapi.DeviceSpec{rw("/dev/accel/accel0", "/host/dev/accel/accel0")},
			},
		},
		"replicas of distinct cards": {
			pool: shared, delivery: DeliveryCDICRI, ids: []string{"0000:03:00.0::1", "0000:00:02.0::0"},
			want: &pluginapi.ContainerAllocateResponse{
				Annotations: annot("0000:03:00.0::1", "0000:00:02.0::0"),
				CdiDevices:  []*pluginapi.CDIDevice{{Name: "dri-cdi.dev/gpu=0000:00:02.0"}, {Name: "dri-cdi.dev/gpu=0000:03:00.0"}},
			},
		},
		"two replicas of one card refused": {
			pool: shared, delivery: DeliveryCDICRI, ids: []string{"0000:03:00.0::0", "0000:03:00.0::1"}, wantErr: ErrSameCard,
		},
		"two replicas of one card collapse to one name when allowed": {
			pool: sharedOK, delivery: DeliveryCDICRI, ids: []string{"0000:03:00.0::0", "0000:03:00.0::1"},
			want: &pluginapi.ContainerAllocateResponse{
				Annotations: annot("0000:03:00.0::0", "0000:03:00.0::1"),
				CdiDevices:  []*pluginapi.CDIDevice{{Name: "dri-cdi.dev/gpu=0000:03:00.0"}},
			},
		},
		"unknown ID":                   {pool: one, delivery: DeliveryCDICRI, ids: []string{"0000:09:00.0"}, wantErr: ErrUnknownDevice},
		"bare card ID in replica pool": {pool: shared, delivery: DeliveryCDICRI, ids: []string{a.ID}, wantErr: ErrUnknownDevice},
		"replica ID in plain pool":     {pool: one, delivery: DeliveryCDICRI, ids: []string{"0000:03:00.0::0"}, wantErr: ErrUnknownDevice},
		"unhealthy":                    {pool: one, unhealthy: map[string]bool{a.ID: true}, delivery: DeliveryNRI, ids: []string{b.ID, a.ID}, wantErr: ErrUnhealthyDevice},
		"duplicate":                    {pool: one, delivery: DeliveryCDICRI, ids: []string{a.ID, a.ID}, wantErr: ErrDuplicateDevice},
		"empty":                        {pool: one, delivery: DeliveryCDICRI, ids: nil, wantErr: ErrEmptyRequest},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := buildState(tc.pool, tc.unhealthy, tc.delivery, testName)
			got, err := st.allocate(tc.ids, tc.delivery)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Contains(t, err.Error(), res)
				require.NotEqual(t, "other", errorReason(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseDelivery(t *testing.T) {
	for _, s := range []string{"cdi-cri", "nri", "device-specs"} {
		d, err := ParseDelivery(s)
		require.NoError(t, err)
		require.Equal(t, Delivery(s), d)
	}
	_, err := ParseDelivery("cdi")
	require.ErrorContains(t, err, `invalid delivery mode "cdi"`)
}
