package dmem

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/dmem/dmemtest"
)

const capacity = "drm/0000:03:00.0/vram0 8589934592\ndrm/0000:03:00.0/vram1 4294967296\ndrm/0000:04:00.0/vram 17179869184\n"

func TestReadHost(t *testing.T) {
	t.Run("cgroup v1", func(t *testing.T) {
		h, err := ReadHost(dmemtest.Root(t, map[string]string{"memory/tasks": ""}))
		require.NoError(t, err)
		require.False(t, h.V2)
		_, why := h.CardEnforceable("0000:03:00.0")
		require.Equal(t, ReasonCgroupV1, why.Reason)
	})
	t.Run("v2 without dmem", func(t *testing.T) {
		h, err := ReadHost(dmemtest.Root(t, map[string]string{controllersFile: "cpu memory pids\n"}))
		require.NoError(t, err)
		require.True(t, h.V2)
		require.False(t, h.Controller)
		_, why := h.CardEnforceable("0000:03:00.0")
		require.Equal(t, ReasonNoController, why.Reason)
	})
	t.Run("dmem", func(t *testing.T) {
		h, err := ReadHost(dmemtest.Root(t, map[string]string{controllersFile: "cpu dmem memory\n", CapacityFile: capacity}))
		require.NoError(t, err)
		require.True(t, h.Controller)
		regions, why := h.CardEnforceable("0000:03:00.0")
		require.Nil(t, why)
		require.Equal(t, []Region{{"drm/0000:03:00.0/vram0", 8 << 30}, {"drm/0000:03:00.0/vram1", 4 << 30}}, regions)
		_, why = h.CardEnforceable("0000:00:02.0")
		require.Equal(t, ReasonNoRegion, why.Reason)
		require.ErrorContains(t, why, "card 0000:00:02.0: device memory limit cannot be enforced (no_region)")
	})
	t.Run("malformed capacity", func(t *testing.T) {
		root := dmemtest.Root(t, map[string]string{controllersFile: "dmem\n", CapacityFile: "drm/0000:03:00.0/vram0 lots\n"})
		_, err := ReadHost(root)
		require.EqualError(t, err, "parse "+filepath.Join(root, CapacityFile)+`: line 1 "drm/0000:03:00.0/vram0 lots": size "lots" is not a byte count`)
	})
}

func TestParentCgroup(t *testing.T) {
	for in, want := range map[string]string{
		"/kubepods/burstable/pod1234/abcd":                     "/kubepods/burstable/pod1234",
		"/kubepods/pod1234/abcd":                               "/kubepods/pod1234",
		"kubepods-burstable-pod1234.slice:cri-containerd:abcd": "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice",
		"kubepods-pod1234.slice:cri-containerd:abcd":           "/kubepods.slice/kubepods-pod1234.slice",
		"system.slice:docker:abcd":                             "/system.slice",
		"-.slice:cri-containerd:abcd":                          "/",
	} {
		got, err := ParentCgroup(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "/", "kubepods.slice:abcd", "kubepods--x.slice:p:n", "kubepods:p:n", "a.slice:p:"} {
		_, err := ParentCgroup(bad)
		require.Error(t, err, bad)
	}
}

func TestDelegated(t *testing.T) {
	root := dmemtest.Root(t, map[string]string{
		controllersFile: "dmem\n", CapacityFile: capacity,
		"kubepods/burstable/podA/" + subtreeFile:                                               "cpu memory dmem\n",
		"kubepods/burstable/podB/" + subtreeFile:                                               "cpu memory\n",
		"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podC.slice/" + subtreeFile: "dmem pids\n",
	})
	h, err := ReadHost(root)
	require.NoError(t, err)
	require.Nil(t, h.Delegated("c", "/kubepods/burstable/podA/ctr"))
	require.Nil(t, h.Delegated("c", "kubepods-burstable-podC.slice:cri-containerd:ctr"))
	require.Equal(t, ReasonNotDelegated, h.Delegated("c", "/kubepods/burstable/podB/ctr").Reason)
	require.Equal(t, ReasonNotDelegated, h.Delegated("c", "/kubepods/burstable/podMissing/ctr").Reason)
	require.Equal(t, ReasonUnknownCgroup, h.Delegated("c", "").Reason)
}

func TestSplitAndValue(t *testing.T) {
	one := []Region{{"drm/0000:04:00.0/vram", 16 << 30}}
	require.Equal(t, "drm/0000:04:00.0/vram 4294967296", Value(Split(one, 4<<30)))

	// Two regions share the amount in proportion to their sizes, and
	// never add up to more than it.
	two := []Region{{"drm/0000:03:00.0/vram0", 8 << 30}, {"drm/0000:03:00.0/vram1", 4 << 30}}
	require.Equal(t, []Limit{{"drm/0000:03:00.0/vram0", 2 << 30}, {"drm/0000:03:00.0/vram1", 1 << 30}}, Split(two, 3<<30))
	odd := Split(two, 1000)
	require.LessOrEqual(t, odd[0].Bytes+odd[1].Bytes, int64(1000))
	require.Equal(t, "drm/0000:03:00.0/vram0 666\ndrm/0000:03:00.0/vram1 333", Value(odd))

	// No region's part is 0, and none exceeds the region; sizes near
	// the int64 range do not overflow.
	require.Equal(t, int64(1), Split(two, 1)[1].Bytes)
	huge := []Region{{"a", 1 << 62}, {"b", 1 << 62}}
	require.Equal(t, []Limit{{"a", 1 << 61}, {"b", 1 << 61}}, Split(huge, 1<<62))
}
