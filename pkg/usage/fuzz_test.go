package usage_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/usage"
)

// FuzzParseFDInfo checks that any text parses without a panic, that a
// result always has its driver, and that every engine's capacity is at
// least 1 (the busy fraction divides by it).
func FuzzParseFDInfo(f *testing.F) {
	for _, text := range driverFDInfo {
		f.Add([]byte(text))
	}
	f.Add([]byte("drm-driver: x\ndrm-engine-capacity-: 0\ndrm-total-: 1 MiB\ndrm-: :\n"))
	f.Add([]byte("drm-driver:\x00\ndrm-engine-a: 18446744073709551615 ns\ndrm-memory-a: 18446744073709551615 KiB"))
	f.Fuzz(func(t *testing.T, text []byte) {
		info, err := usage.ParseFDInfo(text)
		if err != nil {
			require.ErrorIs(t, err, usage.ErrNotDRM)
			return
		}
		require.NotEmpty(t, info.Driver)
		require.GreaterOrEqual(t, info.Malformed, 0)
		require.LessOrEqual(t, info.Malformed, strings.Count(string(text), "\n")+1)
		for name, e := range info.Engines {
			require.NotEmpty(t, name)
			require.GreaterOrEqual(t, e.Capacity, uint64(1))
		}
	})
}

// FuzzParseCgroup checks that any cgroup text parses without a panic and
// that an owner always has a pod UID of the right shape.
func FuzzParseCgroup(f *testing.F) {
	f.Add("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b2c3d_1111_2222_3333_444455556666.slice/cri-containerd-" + ctrID + ".scope\n")
	f.Add("12:devices:/kubepods/besteffort/pod" + podUID + "/" + ctrID + "\n0::/\n")
	f.Add("0::/kubepods-pod.slice/-.scope\n1:a:pod/\n")
	f.Fuzz(func(t *testing.T, text string) {
		o := usage.ParseCgroup(text)
		if o.Host() {
			require.Empty(t, o.ContainerID)
			return
		}
		require.Contains(t, []int{32, 36}, len(o.PodUID))
		require.NotContains(t, o.PodUID, "_")
		require.NotContains(t, o.ContainerID, "/")
	})
}
