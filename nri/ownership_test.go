package nri

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// TestOwnershipMatchesCDILibrary proves the one ownership rule
// (docs/architecture.md): for every process user and host node owner, the
// node the nri path adds is owned exactly like the node the runtime's CDI
// library injects from the spec the agent writes. Both sides run the real
// code: cdi.Generate and the CDI library's cache InjectDevices (which runs
// (*ContainerEdits).Apply) on an OCI spec, and the SpecIndex over the same
// files with deviceAdjustment. As root, the host nodes are real char
// devices with the given owner and mode, so the mode is compared too.
func TestOwnershipMatchesCDILibrary(t *testing.T) {
	asRoot := os.Geteuid() == 0
	if !asRoot {
		t.Log("not root: host nodes cannot be created, comparing uid and gid only (the mode needs mknod)")
	}
	hosts := map[string]struct {
		uid, gid uint32
		mode     os.FileMode
	}{
		"root:render 0660": {0, 992, 0o660},
		"root:root 0660":   {0, 0, 0o660},
		"root:video 0640":  {0, 44, 0o640},
		"uid 5, gid 0":     {5, 0, 0o600},
		"uid 5:render":     {5, 992, 0o660},
	}
	users := map[string]*api.User{
		"root":                           {Uid: 0, Gid: 0},
		"root, group 1000":               {Uid: 0, Gid: 1000},
		"uid 1000":                       {Uid: 1000, Gid: 1000},
		"uid 1000, group 0":              {Uid: 1000, Gid: 0},
		"uid 1000, extra groups 0 and 5": {Uid: 1000, Gid: 1000, AdditionalGids: []uint32{0, 5}},
		"nobody":                         {Uid: 65534, Gid: 65534},
		"uid 1000, group 992":            {Uid: 1000, Gid: 992},
	}
	for hname, h := range hosts {
		t.Run(hname, func(t *testing.T) {
			devDir := t.TempDir()
			render := drm.DeviceNode{
				Path: "/dev/dri/renderD128", HostPath: filepath.Join(devDir, "renderD128"),
				Major: 226, Minor: 128, Mode: h.mode, UID: h.uid, GID: h.gid,
			}
			card := render
			card.Path, card.HostPath, card.Minor = "/dev/dri/card1", filepath.Join(devDir, "card1"), 1
			if asRoot {
				for _, n := range []drm.DeviceNode{render, card} {
					require.NoError(t, unix.Mknod(n.HostPath, unix.S_IFCHR|uint32(h.mode), int(unix.Mkdev(n.Major, n.Minor))))
					require.NoError(t, os.Chmod(n.HostPath, h.mode))
					require.NoError(t, os.Lchown(n.HostPath, int(h.uid), int(h.gid)))
				}
			}
			const id = "0000:00:02.0"
			files, err := cdi.Generate(cdi.DefaultKind, []drm.Card{{
				ID: id, Name: "card1", Driver: "i915", Bus: "pci", PCIAddress: id, NUMANode: -1,
				CardNode: card, RenderNode: &render,
			}})
			require.NoError(t, err)
			specDir := t.TempDir()
			for _, f := range files {
				require.NoError(t, os.WriteFile(filepath.Join(specDir, f.Name), f.Data, 0o644))
			}
			cache, err := cdilib.NewCache(cdilib.WithSpecDirs(specDir), cdilib.WithAutoRefresh(false))
			require.NoError(t, err)
			require.Empty(t, cache.GetErrors())
			store := NewSpecIndex(specDir, cdi.DefaultKind, cdi.LoadDevices, nil, logrus.NewEntry(logrus.New()))
			require.NoError(t, store.Reload())

			for uname, u := range users {
				t.Run(uname, func(t *testing.T) {
					spec := &oci.Spec{
						Process: &oci.Process{User: oci.User{UID: u.Uid, GID: u.Gid, AdditionalGids: append([]uint32(nil), u.AdditionalGids...)}},
						Linux:   &oci.Linux{Resources: &oci.LinuxResources{Devices: []oci.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}}},
					}
					_, err := cache.InjectDevices(spec, cdi.QualifiedName(cdi.DefaultKind, id))
					require.NoError(t, err)
					viaCDI := map[string]string{}
					for _, d := range spec.Linux.Devices {
						viaCDI[d.Path] = ociOwner(d.UID, d.GID, d.FileMode, asRoot)
					}
					require.Equal(t, u.AdditionalGids, spec.Process.User.AdditionalGids, "the CDI library adds no group")

					ctr := &api.Container{User: u}
					adj, _, err := deviceAdjustment(ctr, []string{id}, store)
					require.NoError(t, err)
					viaNRI := map[string]string{}
					for _, d := range adj.GetLinux().GetDevices() {
						viaNRI[d.Path] = ociOwner(d.Uid.Get(), d.Gid.Get(), d.FileMode.Get(), asRoot)
					}
					require.Len(t, viaCDI, 2)
					require.Equal(t, viaCDI, viaNRI, "cdi-cri and nri must give the same owner")
					require.Empty(t, adj.GetLinux().GetResources().GetDevices(), "the runtime adds the cgroup rule of an added device")

					// The rule, spelled out: never gid 0 unless the process
					// already has it and the host node is root-owned.
					for p, d := range spec.Linux.Devices {
						gid := uint32(0)
						if d.GID != nil {
							gid = *d.GID
						}
						switch {
						case h.gid != 0:
							require.Equal(t, h.gid, gid, "%d: the host node's group", p)
						default:
							require.Equal(t, u.Gid, gid, "%d: host gid 0: the process's own gid", p)
						}
					}
				})
			}
		})
	}
}

// ociOwner renders a node's owner as runc applies it: an unset uid or gid
// is 0. The mode counts only where the host nodes are real.
func ociOwner(uid, gid *uint32, mode *os.FileMode, withMode bool) string {
	var u, g uint32
	if uid != nil {
		u = *uid
	}
	if gid != nil {
		g = *gid
	}
	if !withMode {
		return fmt.Sprintf("%d:%d", u, g)
	}
	m := "unset"
	if mode != nil {
		m = fmt.Sprintf("%#o", mode.Perm())
	}
	return fmt.Sprintf("%d:%d %s", u, g, m)
}
