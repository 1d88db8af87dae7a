package doctor

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckCgroup runs the doctor over fake host roots whose
// /sys/fs/cgroup is laid out as each cgroup setup shows it, and checks
// the cgroup and cgroup.dmem results.
func TestCheckCgroup(t *testing.T) {
	cases := map[string]struct {
		// files under /sys/fs/cgroup, by path; a path ending in / is a
		// directory.
		files map[string]string
		// want is the status of each result; a missing result is "".
		want map[string]Status
		// wantIn is text each result's message or fix must contain.
		wantIn map[string][]string
	}{
		"v2 root without dmem": {
			files:  map[string]string{"cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n", "cgroup.procs": "1\n"},
			want:   map[string]Status{"cgroup": OK, "cgroup.dmem": OK},
			wantIn: map[string][]string{"cgroup": {"cgroup v2", "cgroup_device", "bpftool cgroup show", "DeviceAllow="}, "cgroup.dmem": {"no dmem controller", "6.14", "containers start"}},
		},
		"v2 root with dmem and an xe and an amdgpu region": {
			files: map[string]string{
				"cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc dmem\n",
				"dmem.capacity":      "drm/0000:03:00.0/vram0 17163091968\ndrm/0000:0a:00.0/vram 8589934592\n",
			},
			want:   map[string]Status{"cgroup": OK, "cgroup.dmem": OK},
			wantIn: map[string][]string{"cgroup.dmem": {"2 region(s)", "drm/0000:03:00.0/vram0 (16.0 GiB)", "drm/0000:0a:00.0/vram (8.0 GiB)"}},
		},
		"v2 root with dmem and no region (i915 only)": {
			files:  map[string]string{"cgroup.controllers": "cpu memory pids dmem\n", "dmem.capacity": ""},
			want:   map[string]Status{"cgroup": OK, "cgroup.dmem": OK},
			wantIn: map[string][]string{"cgroup.dmem": {"no driver registered a region", "i915"}},
		},
		"v2 root with dmem but no readable capacity": {
			files:  map[string]string{"cgroup.controllers": "cpu memory pids dmem\n"},
			want:   map[string]Status{"cgroup": OK, "cgroup.dmem": Warn},
			wantIn: map[string][]string{"cgroup.dmem": {"dmem.capacity", "run as root"}},
		},
		"v2 sub-tree of a private cgroup namespace, dmem not delegated": {
			files:  map[string]string{"cgroup.controllers": "", "cgroup.type": "domain\n", "cgroup.events": "populated 1\nfrozen 0\n"},
			want:   map[string]Status{"cgroup": OK, "cgroup.dmem": Warn},
			wantIn: map[string][]string{"cgroup.dmem": {"sub-tree", "private cgroup namespace", "dmem.capacity is not visible", "cannot tell", "--host-root"}},
		},
		"v2 sub-tree of a private cgroup namespace, dmem delegated": {
			files:  map[string]string{"cgroup.controllers": "cpu memory pids dmem\n", "cgroup.type": "domain\n", "dmem.max": "drm/0000:03:00.0/vram0 max\n"},
			want:   map[string]Status{"cgroup": OK, "cgroup.dmem": OK},
			wantIn: map[string][]string{"cgroup.dmem": {"dmem.capacity is not visible", "delegated to this sub-tree, so the kernel has it"}},
		},
		"v1 hybrid": {
			files:  map[string]string{"unified/cgroup.controllers": "hugetlb\n", "devices/": "", "memory/": ""},
			want:   map[string]Status{"cgroup": Warn, "cgroup.dmem": ""},
			wantIn: map[string][]string{"cgroup": {"hybrid", "devices controller", "no device programs", "failCgroupV1"}},
		},
		"v1": {
			files:  map[string]string{"devices/": "", "memory/": ""},
			want:   map[string]Status{"cgroup": Warn, "cgroup.dmem": ""},
			wantIn: map[string][]string{"cgroup": {"cgroup v1: the devices controller", "failCgroupV1"}},
		},
		"nothing mounted": {
			files:  map[string]string{},
			want:   map[string]Status{"cgroup": Warn, "cgroup.dmem": ""},
			wantIn: map[string][]string{"cgroup": {"cannot tell the cgroup version"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			cg := filepath.Join(root, "sys/fs/cgroup")
			require.NoError(t, os.MkdirAll(cg, 0o755))
			for p, body := range tc.files {
				if p[len(p)-1] == '/' {
					require.NoError(t, os.MkdirAll(filepath.Join(cg, p), 0o755))
					continue
				}
				writeFile(t, filepath.Join(cg, p), body)
			}
			opts := DefaultOptions()
			opts.Root = root
			rep, err := Check(context.Background(), opts)
			require.NoError(t, err)
			requireResults(t, rep, tc.want, tc.wantIn)
		})
	}
}

// requireResults checks the status of each named result of rep ("" for
// none) and the texts each one's message or fix must contain. A name
// must not stand for two results.
func requireResults(t *testing.T, rep *Report, want map[string]Status, wantIn map[string][]string) {
	t.Helper()
	got := map[string]Result{}
	for _, r := range rep.Results {
		if _, checked := want[r.Name]; checked {
			require.NotContains(t, got, r.Name, "one %s result", r.Name)
			got[r.Name] = r
		}
	}
	for check, status := range want {
		require.Equal(t, status, got[check].Status, "%s: %+v", check, got[check])
	}
	for check, texts := range wantIn {
		for _, text := range texts {
			require.Contains(t, got[check].Message+" "+got[check].Fix, text, check)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 8 << 30: "8.0 GiB", 3 << 40: "3.0 TiB"} {
		require.Equal(t, want, humanBytes(n), "%d", n)
	}
}
