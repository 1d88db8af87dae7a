package nri

import (
	"os"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

const renderGID = 109

// fakeSource is a DeviceSource over a fixed map.
type fakeSource map[string][]drm.DeviceNode

func (f fakeSource) Nodes(id string) ([]drm.DeviceNode, bool) {
	n, ok := f[id]
	return n, ok
}

func node(path string, major, minor uint32, mode os.FileMode, gid uint32) drm.DeviceNode {
	return drm.DeviceNode{Path: path, HostPath: path, Major: major, Minor: minor, Mode: mode, GID: gid}
}

var testSource = fakeSource{
	cardA: {
		node("/dev/dri/card1", 226, 1, 0o660, 44),
		node("/dev/dri/renderD128", 226, 128, 0o660, renderGID),
	},
	cardB: {
		node("/dev/dri/card2", 226, 2, 0o660, 44),
		node("/dev/dri/renderD129", 226, 129, 0o660, renderGID),
		node("/dev/kfd", 235, 0, 0o666, renderGID),
	},
	"0000:04:00.0": {
		node("/dev/dri/card3", 226, 3, 0, 0),
		node("/dev/kfd", 235, 0, 0o666, renderGID),
	},
	"conflicting-kfd": {
		node("/dev/kfd", 235, 1, 0o666, renderGID),
	},
}

// dev is what an added node is expected to look like.
type dev struct {
	path         string
	major, minor int64
	mode         os.FileMode
	uid, gid     uint32
}

func devices(adj *api.ContainerAdjustment) []dev {
	var out []dev
	for _, d := range adj.GetLinux().GetDevices() {
		out = append(out, dev{
			path: d.Path, major: d.Major, minor: d.Minor,
			mode: *d.FileMode.Get(), uid: *d.Uid.Get(), gid: *d.Gid.Get(),
		})
	}
	return out
}

// cardANodes is what cardA's nodes become in a container of user uid:
// owned by the user, in the host's groups, with the host's mode.
func cardANodes(uid uint32) []dev {
	return []dev{
		{"/dev/dri/card1", 226, 1, 0o660, uid, 44},
		{"/dev/dri/renderD128", 226, 128, 0o660, uid, renderGID},
	}
}

func TestDeviceAdjustment(t *testing.T) {
	present := func(devs ...*api.LinuxDevice) *api.LinuxContainer { return &api.LinuxContainer{Devices: devs} }
	cdiNode := func(p string, major, minor int64) *api.LinuxDevice {
		return &api.LinuxDevice{Path: p, Type: "c", Major: major, Minor: minor}
	}
	tests := map[string]struct {
		ctr   *api.Container
		cards []string
		// want is the devices added, in order; the paths that
		// deviceAdjustment returns are theirs.
		want    []dev
		wantErr error
	}{
		"root user keeps host owner and mode": {
			ctr:   &api.Container{User: &api.User{Uid: 0, Gid: 0}},
			cards: []string{cardA},
			want:  cardANodes(0),
		},
		"no user known": {
			ctr:   &api.Container{},
			cards: []string{cardA},
			want:  cardANodes(0),
		},
		"non-root user owns the nodes, in the host group": {
			ctr:   &api.Container{User: &api.User{Uid: 1000, Gid: 1000, AdditionalGids: []uint32{0, 5}}},
			cards: []string{cardA},
			want:  cardANodes(1000),
		},
		"non-root user in group 0 gets the host group": {
			ctr:   &api.Container{User: &api.User{Uid: 1000, Gid: 0}},
			cards: []string{cardA},
			want:  cardANodes(1000),
		},
		"non-root user in group 0, host group 0, unknown mode": {
			ctr:   &api.Container{User: &api.User{Uid: 1000, Gid: 0}},
			cards: []string{"0000:04:00.0"},
			want: []dev{
				{"/dev/dri/card3", 226, 3, 0o660, 1000, 0},
				{"/dev/kfd", 235, 0, 0o666, 1000, renderGID},
			},
		},
		"already injected by the runtime's CDI": {
			ctr:   &api.Container{Linux: present(cdiNode("/dev/dri/card1", 226, 1), cdiNode("/dev/dri/renderD128", 226, 128))},
			cards: []string{cardA},
		},
		"partly injected": {
			ctr:   &api.Container{Linux: present(cdiNode("/dev/dri/card1", 226, 1))},
			cards: []string{cardA},
			want:  []dev{{"/dev/dri/renderD128", 226, 128, 0o660, 0, renderGID}},
		},
		"shared node of two cards added once": {
			ctr:   &api.Container{},
			cards: []string{cardB, "0000:04:00.0"},
			want: []dev{
				{"/dev/dri/card2", 226, 2, 0o660, 0, 44},
				{"/dev/dri/renderD129", 226, 129, 0o660, 0, renderGID},
				{"/dev/kfd", 235, 0, 0o666, 0, renderGID},
				{"/dev/dri/card3", 226, 3, 0o660, 0, 0},
			},
		},
		"path present with other numbers": {
			ctr:     &api.Container{Linux: present(cdiNode("/dev/dri/renderD128", 226, 129))},
			cards:   []string{cardA},
			wantErr: ErrDeviceConflict,
		},
		"path present as a block device": {
			ctr:     &api.Container{Linux: present(&api.LinuxDevice{Path: "/dev/dri/card1", Type: "b", Major: 226, Minor: 1})},
			cards:   []string{cardA},
			wantErr: ErrDeviceConflict,
		},
		"two cards disagree on a shared node": {
			ctr:     &api.Container{},
			cards:   []string{cardB, "conflicting-kfd"},
			wantErr: ErrDeviceConflict,
		},
		"card unknown to the specs": {
			ctr:     &api.Container{},
			cards:   []string{cardA, "0000:99:00.0"},
			wantErr: ErrUnknownCard,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			adj, added, err := deviceAdjustment(tc.ctr, tc.cards, testSource)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Nil(t, adj)
				return
			}
			require.NoError(t, err)
			var wantAdded []string
			for _, d := range tc.want {
				wantAdded = append(wantAdded, d.path)
			}
			require.Equal(t, wantAdded, added)
			if tc.want == nil {
				require.Nil(t, adj)
				return
			}
			require.Equal(t, tc.want, devices(adj))
			for _, d := range adj.GetLinux().GetDevices() {
				require.Equal(t, "c", d.Type)
			}
		})
	}
}

func TestDeviceAdjustmentErrorsNameTheInput(t *testing.T) {
	_, _, err := deviceAdjustment(&api.Container{}, []string{"0000:99:00.0"}, testSource)
	require.ErrorContains(t, err, "0000:99:00.0")
	ctr := &api.Container{Linux: &api.LinuxContainer{Devices: []*api.LinuxDevice{{Path: "/dev/dri/renderD128", Type: "c", Major: 226, Minor: 129}}}}
	_, _, err = deviceAdjustment(ctr, []string{cardA}, testSource)
	require.ErrorContains(t, err, "/dev/dri/renderD128")
	require.ErrorContains(t, err, "226:128")
	require.ErrorContains(t, err, "226:129")
}

func TestDRIMounts(t *testing.T) {
	allowAll := &api.LinuxContainer{Resources: &api.LinuxResources{Devices: []*api.LinuxDeviceCgroup{
		{Allow: false, Access: "rwm"}, {Allow: true, Access: "rwm"},
	}}}
	denyAll := &api.LinuxContainer{Resources: &api.LinuxResources{Devices: []*api.LinuxDeviceCgroup{
		{Allow: false, Access: "rwm"}, {Allow: true, Type: "c", Major: api.Int64(int64(1)), Minor: api.Int64(int64(3)), Access: "rwm"},
	}}}
	bind := func(src, dst string) *api.Mount {
		return &api.Mount{Source: src, Destination: dst, Type: "bind", Options: []string{"rbind", "rw"}}
	}
	tests := map[string]struct {
		ctr  *api.Container
		want []string
	}{
		"no mounts":       {ctr: &api.Container{}},
		"unrelated":       {ctr: &api.Container{Mounts: []*api.Mount{bind("/data", "/data"), bind("/dev/shm", "/dev/shm")}}},
		"dev dri":         {ctr: &api.Container{Mounts: []*api.Mount{bind("/dev/dri", "/dev/dri")}, Linux: denyAll}, want: []string{"/dev/dri:/dev/dri"}},
		"render node":     {ctr: &api.Container{Mounts: []*api.Mount{bind("/dev/dri/renderD128", "/gpu")}}, want: []string{"/dev/dri/renderD128:/gpu"}},
		"into dev dri":    {ctr: &api.Container{Mounts: []*api.Mount{bind("/host/gpu", "/dev/dri/")}}, want: []string{"/host/gpu:/dev/dri/"}},
		"lookalike":       {ctr: &api.Container{Mounts: []*api.Mount{bind("/dev/drivers", "/dev/drivers")}}},
		"dev accel":       {ctr: &api.Container{Mounts: []*api.Mount{bind("/dev/accel", "/dev/accel")}}, want: []string{"/dev/accel:/dev/accel"}},
		"accel node":      {ctr: &api.Container{Mounts: []*api.Mount{bind("/dev/accel/accel0", "/npu")}}, want: []string{"/dev/accel/accel0:/npu"}},
		"accel lookalike": {ctr: &api.Container{Mounts: []*api.Mount{bind("/dev/accelerometer", "/dev/accelerometer")}}},
		"privileged":      {ctr: &api.Container{Mounts: []*api.Mount{bind("/dev/dri", "/dev/dri")}, Linux: allowAll}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, driMounts(tc.ctr))
		})
	}
}
