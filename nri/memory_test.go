package nri_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/dmem/dmemtest"
	"github.com/dri-cdi/dri-cdi/pkg/dracheckpoint"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
)

const (
	resXe   = "dri-cdi.dev/xe"
	gib     = int64(1) << 30
	podCgrp = "/kubepods/burstable/poddmem"
)

// share is a share of card in claim as the kubelet reports it.
func share(claim, card, shareID string) podresources.ClaimDevice {
	d := draDevice(claim, card)
	d.ShareID = shareID
	return d
}

// prepared is the checkpoint entry dri-cdi-dra wrote for share d with
// memory bytes of device memory.
func prepared(d podresources.ClaimDevice, card string, memory int64) dracheckpoint.Claim {
	return dracheckpoint.Claim{Namespace: d.Namespace, Name: d.Claim, Devices: []dracheckpoint.Device{{
		Request: "gpu", Pool: d.Pool, Device: d.Device, Card: card, CDI: d.CDIDevices,
		Resource: resXe, ShareID: d.ShareID, Shares: 1, Memory: memory,
	}}}
}

func cgroupsPath(p string) ctrOpt {
	return func(c *api.Container) {
		if c.Linux == nil {
			c.Linux = &api.LinuxContainer{}
		}
		c.Linux.CgroupsPath = p
	}
}

// cgroupV2WithDmem is a cgroup v2 root whose kernel has dmem, where cardA
// has no region (an iGPU), cardB has two VRAM regions (an xe card with
// two tiles), and the pod's cgroup delegates dmem to its containers.
func cgroupV2WithDmem(t *testing.T) string {
	return dmemtest.Root(t, map[string]string{
		"cgroup.controllers":                "cpuset cpu io memory hugetlb pids rdma misc dmem\n",
		"dmem.capacity":                     "drm/" + cardB + "/vram0 12884901888\ndrm/" + cardB + "/vram1 4294967296\n",
		podCgrp + "/cgroup.subtree_control": "cpu memory pids dmem\n",
		"/kubepods/besteffort/podnodmem/cgroup.subtree_control": "cpu memory pids\n",
	})
}

func TestCreateContainerMemoryLimits(t *testing.T) {
	v2 := cgroupV2WithDmem(t)
	oneRegion := dmemtest.Root(t, map[string]string{
		"cgroup.controllers":                "cpu memory dmem\n",
		"dmem.capacity":                     "drm/" + cardB + "/vram 8589934592\n",
		podCgrp + "/cgroup.subtree_control": "dmem\n",
	})
	v2NoDmem := dmemtest.Root(t, map[string]string{"cgroup.controllers": "cpu memory pids\n", podCgrp + "/cgroup.subtree_control": "cpu\n"})
	v1 := dmemtest.Root(t, map[string]string{"memory/tasks": "", "devices/tasks": ""})

	shareB := share("gpu", cardB, "share-b")
	shareA := share("igpu", cardA, "share-a")
	noMemory := share("other", cardB, "share-none")
	checkpoint := map[string]dracheckpoint.Claim{
		"uid-b":    prepared(shareB, cardB, 4*gib),
		"uid-a":    prepared(shareA, cardA, 1*gib),
		"uid-none": prepared(noMemory, cardB, 0),
	}
	ctrB := func(opts ...ctrOpt) *api.Container {
		return container("app", append([]ctrOpt{cdiNames(cardB), cdiInjected(cardB)}, opts...)...)
	}
	tests := map[string]struct {
		root     string
		required bool
		ctr      *api.Container
		claims   []podresources.ClaimDevice
		// want is the unified map of the adjusted spec; wantReason the
		// unenforceable reason counted.
		want       map[string]string
		wantReason string
		wantErr    []string
	}{
		"one region on cgroup v2 with dmem: its limit": {
			root: oneRegion, ctr: ctrB(cgroupsPath(podCgrp + "/ctr")), claims: []podresources.ClaimDevice{shareB},
			want: map[string]string{"dmem.max": "drm/" + cardB + "/vram 4294967296"},
		},
		"two regions: one value, one line per region, in proportion to their sizes": {
			root: v2, ctr: ctrB(cgroupsPath(podCgrp + "/ctr")), claims: []podresources.ClaimDevice{shareB},
			want: map[string]string{"dmem.max": "drm/" + cardB + "/vram0 3221225472\ndrm/" + cardB + "/vram1 1073741824"},
		},
		"systemd cgroups path": {
			root: dmemtest.Root(t, map[string]string{
				"cgroup.controllers": "dmem\n", "dmem.capacity": "drm/" + cardB + "/vram 8589934592\n",
				"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poddmem.slice/cgroup.subtree_control": "dmem memory\n",
			}),
			ctr: ctrB(cgroupsPath("kubepods-burstable-poddmem.slice:cri-containerd:ctr")), claims: []podresources.ClaimDevice{shareB},
			want: map[string]string{"dmem.max": "drm/" + cardB + "/vram 4294967296"},
		},
		"a share without memory: nothing, never a zero limit": {
			root: v2, ctr: ctrB(cgroupsPath(podCgrp + "/ctr")), claims: []podresources.ClaimDevice{noMemory},
		},
		"cgroup v1: nothing": {
			root: v1, ctr: ctrB(cgroupsPath(podCgrp + "/ctr")), claims: []podresources.ClaimDevice{shareB},
			wantReason: "cgroup_v1",
		},
		"cgroup v2 without dmem: nothing": {
			root: v2NoDmem, ctr: ctrB(cgroupsPath(podCgrp + "/ctr")), claims: []podresources.ClaimDevice{shareB},
			wantReason: "no_dmem_controller",
		},
		"card without a region: nothing": {
			root: v2, ctr: container("app", cdiNames(cardA), cdiInjected(cardA), cgroupsPath(podCgrp+"/ctr")),
			claims: []podresources.ClaimDevice{shareA}, wantReason: "no_region",
		},
		"dmem not in the parent's subtree_control: nothing": {
			root: v2, ctr: ctrB(cgroupsPath("/kubepods/besteffort/podnodmem/ctr")), claims: []podresources.ClaimDevice{shareB},
			wantReason: "not_delegated",
		},
		"a dmem.capacity that cannot be parsed: nothing": {
			root: dmemtest.Root(t, map[string]string{"cgroup.controllers": "dmem\n", "dmem.capacity": "drm/" + cardB + "/vram lots\n"}),
			ctr:  ctrB(cgroupsPath(podCgrp + "/ctr")), claims: []podresources.ClaimDevice{shareB},
			wantReason: "unreadable",
		},
		"requireMemoryLimit on cgroup v1: the container fails, naming the card and the reason": {
			root: v1, required: true, ctr: ctrB(cgroupsPath(podCgrp + "/ctr")), claims: []podresources.ClaimDevice{shareB},
			wantReason: "cgroup_v1",
			wantErr:    []string{"default/dra", `"app"`, "card " + cardB, "(cgroup_v1)", "requireMemoryLimit", "not a cgroup v2 hierarchy"},
		},
		"requireMemoryLimit where it is enforced: the limit": {
			root: oneRegion, required: true, ctr: ctrB(cgroupsPath(podCgrp + "/ctr")), claims: []podresources.ClaimDevice{shareB},
			want: map[string]string{"dmem.max": "drm/" + cardB + "/vram 4294967296"},
		},
		"two cards: the one with a region limited, the other logged": {
			root: v2, ctr: container("app", cdiNames(cardA, cardB), cdiInjected(cardA, cardB), cgroupsPath(podCgrp+"/ctr")),
			claims: []podresources.ClaimDevice{shareA, shareB}, wantReason: "no_region",
			want: map[string]string{"dmem.max": "drm/" + cardB + "/vram0 3221225472\ndrm/" + cardB + "/vram1 1073741824"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cp := filepath.Join(dir, dracheckpoint.File)
			require.NoError(t, dracheckpoint.Save(cp, checkpoint))
			mem := &memoryConfig{draCheckpoint: cp, cgroupRoot: tc.root, required: map[string]bool{resXe: tc.required}}
			r := newRig(t, withMemory(mem))
			r.start()
			r.kubelet.SetPod("default", "dra", map[string]podresourcestest.Container{"app": {}})
			r.kubelet.SetClaims("default", "dra", map[string][]podresources.ClaimDevice{"app": tc.claims})

			spec, err := r.create(pod("dra"), tc.ctr)
			reg := r.plugin.Metrics().Registry()
			if tc.wantReason != "" {
				require.Equal(t, 1.0, metric(t, reg, "dri_cdi_nri_memory_limits_unenforceable_total", "reason", tc.wantReason))
			} else {
				require.Zero(t, sum(t, reg, "dri_cdi_nri_memory_limits_unenforceable_total"))
			}
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				for _, s := range tc.wantErr {
					require.ErrorContains(t, err, s)
				}
				require.Equal(t, 1.0, metric(t, reg, "dri_cdi_nri_errors_total", "reason", "memory_limit"))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, spec.Linux.Resources.Unified)
			if tc.want != nil {
				require.Equal(t, 1.0, metric(t, reg, "dri_cdi_nri_memory_limits_total"))
			}
		})
	}
}

// An unenforceable limit is logged once per card and reason, however
// many containers hit it, and counted for each.
func TestUnenforceableMemoryLimitLoggedOnce(t *testing.T) {
	dir := t.TempDir()
	cp := filepath.Join(dir, dracheckpoint.File)
	d := share("gpu", cardB, "share-b")
	require.NoError(t, dracheckpoint.Save(cp, map[string]dracheckpoint.Claim{"uid-b": prepared(d, cardB, gib)}))
	r := newRig(t, withMemory(&memoryConfig{draCheckpoint: cp, cgroupRoot: dmemtest.Root(t, map[string]string{"memory/tasks": ""})}))
	r.start()
	r.kubelet.SetPod("default", "dra", map[string]podresourcestest.Container{"app": {}})
	r.kubelet.SetClaims("default", "dra", map[string][]podresources.ClaimDevice{"app": {d}})
	for range 3 {
		_, err := r.create(pod("dra"), container("app", cdiNames(cardB), cdiInjected(cardB), cgroupsPath(podCgrp+"/ctr")))
		require.NoError(t, err)
	}
	require.Equal(t, 3.0, metric(t, r.plugin.Metrics().Registry(), "dri_cdi_nri_memory_limits_unenforceable_total", "reason", "cgroup_v1"))
	n := 0
	for _, e := range r.logs.AllEntries() {
		if e.Data["card"] == cardB && e.Data["reason"] == "cgroup_v1" {
			n++
		}
	}
	require.Equal(t, 1, n)
}

// The amount comes from the DRA checkpoint only: a share the checkpoint
// does not hold (another share ID) gets no limit, whatever the pod says,
// and a corrupt checkpoint fails the container that has shares.
func TestMemoryFromTheCheckpointOnly(t *testing.T) {
	dir := t.TempDir()
	cp := filepath.Join(dir, dracheckpoint.File)
	d := share("gpu", cardB, "share-b")
	require.NoError(t, dracheckpoint.Save(cp, map[string]dracheckpoint.Claim{"uid-b": prepared(d, cardB, gib)}))
	r := newRig(t, withMemory(&memoryConfig{draCheckpoint: cp, cgroupRoot: cgroupV2WithDmem(t)}))
	r.start()
	r.kubelet.SetPod("default", "dra", map[string]podresourcestest.Container{"app": {}})
	other := share("gpu", cardB, "share-other")
	r.kubelet.SetClaims("default", "dra", map[string][]podresources.ClaimDevice{"app": {other}})
	spec, err := r.create(pod("dra"), container("app", cdiNames(cardB), cdiInjected(cardB), cgroupsPath(podCgrp+"/ctr"),
		annotation("dri-cdi.dev/memory", "1")))
	require.NoError(t, err)
	require.Nil(t, spec.Linux.Resources.Unified)

	require.NoError(t, os.WriteFile(cp, []byte(`{"version":1,"claims":{},"checksum":"bad"}`), 0o600))
	r.kubelet.SetClaims("default", "dra", map[string][]podresources.ClaimDevice{"app": {d}})
	_, err = r.create(pod("dra"), container("app", cdiNames(cardB), cdiInjected(cardB), cgroupsPath(podCgrp+"/ctr")))
	require.ErrorContains(t, err, "cannot confirm the allocation with the kubelet: device memory of share share-b of claim default/gpu")
	require.ErrorContains(t, err, "checksum mismatch")
}
