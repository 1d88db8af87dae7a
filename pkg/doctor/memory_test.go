package doctor

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestCheckMemoryLimits: one line per card says whether the device
// memory of its shares can be limited, and why not: an xe card with two
// VRAM regions next to an iGPU without one, on each cgroup setup.
func TestCheckMemoryLimits(t *testing.T) {
	xe := drmtest.IntelXe.WithNodes(2, 129)
	const xeID, igpuID = "0000:03:00.0", "0000:00:02.0"
	const capacity = "drm/0000:03:00.0/vram0 17179869184\ndrm/0000:03:00.0/vram1 17179869184\n"
	cases := map[string]struct {
		cgroup map[string]string
		want   map[string]Status
		wantIn map[string][]string
	}{
		"v2 with dmem, delegated from the root": {
			cgroup: map[string]string{"cgroup.controllers": "cpu memory dmem\n", "cgroup.subtree_control": "cpu memory dmem\n", "dmem.capacity": capacity},
			want:   map[string]Status{"memory." + xeID: OK, "memory." + igpuID: OK},
			wantIn: map[string][]string{
				"memory." + xeID:   {"enforceable", "drm/0000:03:00.0/vram0 (16.0 GiB)", "drm/0000:03:00.0/vram1 (16.0 GiB)"},
				"memory." + igpuID: {"no device memory limit", "(no_region)", "i915"},
			},
		},
		"v2 with dmem, not enabled below the root": {
			cgroup: map[string]string{"cgroup.controllers": "cpu memory dmem\n", "cgroup.subtree_control": "cpu memory\n", "dmem.capacity": capacity},
			want:   map[string]Status{"memory." + xeID: Warn, "memory." + igpuID: OK},
			wantIn: map[string][]string{"memory." + xeID: {"(not_delegated)", "cgroup.subtree_control", "enable dmem"}},
		},
		"v2 without dmem": {
			cgroup: map[string]string{"cgroup.controllers": "cpu memory\n"},
			want:   map[string]Status{"memory." + xeID: OK, "memory." + igpuID: OK},
			wantIn: map[string][]string{"memory." + xeID: {"(no_dmem_controller)", "6.14"}},
		},
		"v1": {
			cgroup: map[string]string{"devices/tasks": ""},
			want:   map[string]Status{"memory." + xeID: OK, "memory." + igpuID: OK},
			wantIn: map[string][]string{"memory." + xeID: {"(cgroup_v1)"}, "memory." + igpuID: {"(cgroup_v1)"}},
		},
		"a private cgroup namespace: no line per card": {
			cgroup: map[string]string{"cgroup.controllers": "dmem\n", "cgroup.type": "domain\n"},
			want:   map[string]Status{"memory." + xeID: "", "memory." + igpuID: ""},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opts := node{gpus: []drmtest.GPU{intel, xe}}.build(t)
			for p, body := range tc.cgroup {
				writeFile(t, filepath.Join(opts.Root, "sys/fs/cgroup", p), body)
			}
			rep, err := Check(context.Background(), opts)
			require.NoError(t, err)
			requireResults(t, rep, tc.want, tc.wantIn)
		})
	}
}
