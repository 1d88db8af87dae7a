package usage_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/usage"
	"github.com/dri-cdi/dri-cdi/pkg/usage/usagetest"
)

const (
	podUID = "0a1b2c3d-1111-2222-3333-444455556666"
	ctrID  = "4f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"
)

func TestParseCgroup(t *testing.T) {
	want := usage.Owner{PodUID: podUID, ContainerID: ctrID}
	tests := map[string]struct {
		text string
		want usage.Owner
	}{
		"v2 systemd":          {usagetest.CgroupV2Systemd(podUID, ctrID), want},
		"v1 cgroupfs":         {usagetest.CgroupV1Cgroupfs(podUID, ctrID), want},
		"v2 cgroupfs":         {"0::/kubepods/burstable/pod" + podUID + "/" + ctrID + "\n", want},
		"v1 systemd":          {"11:devices:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0a1b2c3d_1111_2222_3333_444455556666.slice/cri-containerd-" + ctrID + ".scope\n", want},
		"guaranteed":          {"0::/kubepods.slice/kubepods-pod0a1b2c3d_1111_2222_3333_444455556666.slice/cri-containerd-" + ctrID + ".scope\n", want},
		"guaranteed fs":       {"0::/kubepods/pod" + podUID + "/" + ctrID + "\n", want},
		"crio scope":          {"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b2c3d_1111_2222_3333_444455556666.slice/crio-" + ctrID + ".scope\n", want},
		"other cgroupns":      {"0::/../../kubepods-burstable-pod0a1b2c3d_1111_2222_3333_444455556666.slice/cri-containerd-" + ctrID + ".scope\n", want},
		"static pod uid":      {"0::/kubepods/besteffort/pod0123456789abcdef0123456789abcdef/" + ctrID + "\n", usage.Owner{PodUID: "0123456789abcdef0123456789abcdef", ContainerID: ctrID}},
		"pod cgroup only":     {"0::/kubepods/burstable/pod" + podUID + "\n", usage.Owner{PodUID: podUID}},
		"container line wins": {"12:memory:/kubepods/burstable/pod" + podUID + "\n0::/kubepods/burstable/pod" + podUID + "/" + ctrID + "\n", want},
		"host service":        {usagetest.CgroupHost, usage.Owner{}},
		"private ns":          {"12:devices:/\n0::/\n", usage.Owner{}},
		"empty":               {"", usage.Owner{}},
		"not a uid":           {"0::/kubepods/burstable/podxyz/" + ctrID + "\n", usage.Owner{}},
		"bad container":       {"0::/kubepods/burstable/pod" + podUID + "/NOTHEX\n", usage.Owner{PodUID: podUID}},
		"slice not kube":      {"0::/user.slice/user-pod0a1b2c3d_1111_2222_3333_444455556666.slice/x.scope\n", usage.Owner{}},
		"garbage":             {"::::\n\x00\nno colon\n", usage.Owner{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := usage.ParseCgroup(tc.text)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.want.PodUID == "", got.Host())
		})
	}
}
