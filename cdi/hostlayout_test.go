package cdi_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"
	k8syaml "sigs.k8s.io/yaml"
	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"
	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest/hostlayout"
)

// wantNode is a device node a container must get: its path and numbers.
type wantNode struct {
	path         string
	major, minor int64
}

// renderCard is what a card with a render node must inject: its card and
// render nodes (226:card and 226:render), then extra, then the udev
// by-path links named byPath-card and byPath-render.
func renderCard(byPath string, card, render int64, extra ...wantNode) []wantNode {
	nodes := []wantNode{{fmt.Sprintf("/dev/dri/card%d", card), 226, card}, {fmt.Sprintf("/dev/dri/renderD%d", render), 226, render}}
	nodes = append(nodes, extra...)
	return append(nodes,
		wantNode{"/dev/dri/by-path/" + byPath + "-card", 226, card},
		wantNode{"/dev/dri/by-path/" + byPath + "-render", 226, render})
}

// hostLayoutSpecs lists, for the layouts of real hosts, the nodes each
// advertised card must inject, written down from the listings rather than
// derived from discovery.
var hostLayoutSpecs = map[string]map[string][]wantNode{
	"hybrid-laptop": {
		"0000:00:02.0": renderCard("pci-0000:00:02.0", 1, 128),
		"0000:03:00.0": renderCard("pci-0000:03:00.0", 2, 129, wantNode{"/dev/kfd", 237, 0}),
	},
	"qemu-virtio-gpu": {
		"0000:00:02.0": renderCard("pci-0000:00:02.0", 1, 128),
	},
	"server-flex-bmc": {
		"0000:4d:00.0": renderCard("pci-0000:4d:00.0", 2, 129),
		"0000:ca:00.0": renderCard("pci-0000:ca:00.0", 1, 128),
	},
	"arm-rk3399": {
		"ff9a0000.gpu": renderCard("platform-ff9a0000.gpu", 1, 128),
	},
	"legacy-mgag200": {},
}

func init() {
	// The boot-time and the malformed laptop advertise the same two cards:
	// simpledrm is display-only, the broken devices are skipped.
	hostLayoutSpecs["hybrid-laptop-boot"] = hostLayoutSpecs["hybrid-laptop"]
	hostLayoutSpecs["hybrid-laptop-malformed"] = hostLayoutSpecs["hybrid-laptop"]
}

// containerdBaseSpec is the part of the OCI spec containerd's CRI plugin
// builds before CDI injection that injection interacts with: the process
// user and the device cgroup's deny-all rule.
func containerdBaseSpec(uid, gid uint32) *oci.Spec {
	return &oci.Spec{
		Version: oci.Version,
		Process: &oci.Process{User: oci.User{UID: uid, GID: gid}},
		Linux: &oci.Linux{Resources: &oci.LinuxResources{
			Devices: []oci.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
		}},
	}
}

// writeLayoutSpecs builds a host layout, discovers it, and writes the spec
// files of its render-capable cards with a Writer, as the agent does by
// default.
func writeLayoutSpecs(t *testing.T, layout string) (dir string, roots drm.Roots) {
	t.Helper()
	dir, roots, _ = writeLayoutSpecsOf(t, layout, false)
	return dir, roots
}

// writeLayoutSpecsOf is writeLayoutSpecs, for every card when
// displayOnly; it also returns the cards written.
func writeLayoutSpecsOf(t *testing.T, layout string, displayOnly bool) (dir string, roots drm.Roots, advertised []drm.Card) {
	t.Helper()
	roots, err := hostlayout.Build(t.TempDir(), layout)
	require.NoError(t, err)
	inv, err := config.Default().Discover(roots)
	require.NoError(t, err)
	for _, c := range inv.Cards {
		if displayOnly || !c.DisplayOnly() {
			advertised = append(advertised, c)
		}
	}
	dir = filepath.Join(t.TempDir(), "cdi")
	w, err := cdi.NewWriter(dir, cdi.DefaultKind)
	require.NoError(t, err)
	_, err = w.Sync(advertised)
	require.NoError(t, err)
	return dir, roots, advertised
}

// TestHostLayoutDisplayOnlySpecsInject writes specs for every card of
// the layouts, display-only ones included (as a pool with
// includeDisplayOnly does), and injects each: a display-only card gives
// its card node and by-path link, nothing else.
func TestHostLayoutDisplayOnlySpecsInject(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	for _, layout := range []string{"hybrid-laptop-boot", "qemu-virtio-gpu", "server-flex-bmc", "arm-rk3399", "legacy-mgag200"} {
		t.Run(layout, func(t *testing.T) {
			dir, roots, cards := writeLayoutSpecsOf(t, layout, true)
			gids := hostGIDs(t, roots)
			cache, err := cdilib.NewCache(cdilib.WithSpecDirs(dir), cdilib.WithAutoRefresh(false))
			require.NoError(t, err)
			require.Empty(t, cache.GetErrors())
			displayOnly := 0
			for _, c := range cards {
				var expect []wantNode
				for _, n := range c.Nodes() {
					expect = append(expect, wantNode{n.Path, int64(n.Major), int64(n.Minor)})
				}
				if c.DisplayOnly() {
					displayOnly++
					require.Len(t, expect, 2, "%s: card node and its by-path link", c.ID)
				}
				spec := containerdBaseSpec(1000, 1000)
				_, err := cache.InjectDevices(spec, cdi.QualifiedName(cdi.DefaultKind, c.ID))
				require.NoError(t, err)
				checkInjected(t, spec, expect, 1000, gids)
			}
			require.Positive(t, displayOnly)
		})
	}
}

// TestHostLayoutSpecsInject loads the specs written for real host
// layouts with a runtime's CDI cache and injects every device, the
// "all" device, and combinations of both into a containerd-like OCI spec.
func TestHostLayoutSpecsInject(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	require.ElementsMatch(t, hostlayout.Names(), slices.Collect(maps.Keys(hostLayoutSpecs)), "every host layout needs expectations")
	for layout, want := range hostLayoutSpecs {
		t.Run(layout, func(t *testing.T) {
			dir, roots := writeLayoutSpecs(t, layout)
			gids := hostGIDs(t, roots)
			cache, err := cdilib.NewCache(cdilib.WithSpecDirs(dir), cdilib.WithAutoRefresh(false))
			require.NoError(t, err)
			require.Empty(t, cache.GetErrors())

			wantNames := []string{}
			var allNodes []wantNode
			for _, id := range slices.Sorted(maps.Keys(want)) {
				wantNames = append(wantNames, cdi.QualifiedName(cdi.DefaultKind, id))
				allNodes = append(allNodes, want[id]...)
			}
			if len(want) > 0 {
				wantNames = append(wantNames, cdi.QualifiedName(cdi.DefaultKind, cdi.AllDevice))
			}
			sort.Strings(wantNames)
			require.Equal(t, wantNames, nonNil(cache.ListDevices()))

			requests := map[string][]string{}
			for _, id := range slices.Sorted(maps.Keys(want)) {
				requests[id] = []string{id}
				requests["all+"+id] = []string{cdi.AllDevice, id}
				requests[id+"+all"] = []string{id, cdi.AllDevice}
			}
			if len(want) > 0 {
				requests["all"] = []string{cdi.AllDevice}
				requests["every card"] = slices.Sorted(maps.Keys(want))
			}
			for name, devs := range requests {
				t.Run(name, func(t *testing.T) {
					var expect []wantNode
					for _, d := range devs {
						if d == cdi.AllDevice {
							expect = append(expect, allNodes...)
						} else {
							expect = append(expect, want[d]...)
						}
					}
					qualified := make([]string, len(devs))
					for i, d := range devs {
						qualified[i] = cdi.QualifiedName(cdi.DefaultKind, d)
					}
					for _, uid := range []uint32{1000, 0} {
						spec := containerdBaseSpec(uid, uid)
						unresolved, err := cache.InjectDevices(spec, qualified...)
						require.NoError(t, err)
						require.Empty(t, unresolved)
						checkInjected(t, spec, expect, uid, gids)
					}
				})
			}
		})
	}
}

// checkInjected checks the OCI spec after injection: exactly the expected
// device paths, each once, with the host's numbers and mode and owned by
// a non-root container user; the deny-all rule first, then an "rw" allow
// rule for every node and no other rule.
func checkInjected(t *testing.T, spec *oci.Spec, expect []wantNode, uid uint32, hostGID map[[2]int64]uint32) {
	t.Helper()
	want := map[string]wantNode{}
	for _, n := range expect {
		want[n.path] = n
	}
	got := map[string]oci.LinuxDevice{}
	for _, d := range spec.Linux.Devices {
		_, dup := got[d.Path]
		require.False(t, dup, "device %s injected twice", d.Path)
		got[d.Path] = d
	}
	require.ElementsMatch(t, slices.Collect(maps.Keys(want)), slices.Collect(maps.Keys(got)))
	rules := map[string]bool{}
	for _, n := range want {
		d := got[n.path]
		require.Equal(t, "c", d.Type, n.path)
		require.Equal(t, n.major, d.Major, n.path)
		require.Equal(t, n.minor, d.Minor, n.path)
		require.NotNil(t, d.FileMode, "%s: the mode comes from the host node", n.path)
		require.Equal(t, os.FileMode(0o660), *d.FileMode, n.path)
		// The one ownership rule (docs/architecture.md): the host's gid
		// unless it is 0, else the process's gid when not 0; the
		// process's uid when not 0. Test processes have gid == uid.
		gid, ok := hostGID[[2]int64{n.major, n.minor}]
		require.True(t, ok, "%s: no host node %d:%d", n.path, n.major, n.minor)
		if uid == 0 {
			require.Nil(t, d.UID, n.path)
		} else {
			require.NotNil(t, d.UID, n.path)
			require.Equal(t, uid, *d.UID, n.path)
		}
		switch {
		case gid != 0:
			require.NotNil(t, d.GID, n.path)
			require.Equal(t, gid, *d.GID, "%s: the host node's group", n.path)
		case uid != 0:
			require.NotNil(t, d.GID, n.path)
			require.Equal(t, uid, *d.GID, "%s: host gid 0 is never written; the process's own gid", n.path)
		default:
			require.Nil(t, d.GID, n.path)
		}
		rules[fmt.Sprintf("c %d:%d rw", n.major, n.minor)] = true
	}
	cg := spec.Linux.Resources.Devices
	require.NotEmpty(t, cg)
	require.Equal(t, oci.LinuxDeviceCgroup{Allow: false, Access: "rwm"}, cg[0], "the deny-all rule stays first")
	gotRules := map[string]bool{}
	for _, r := range cg[1:] {
		require.True(t, r.Allow)
		require.NotNil(t, r.Major)
		require.NotNil(t, r.Minor)
		gotRules[fmt.Sprintf("%s %d:%d %s", r.Type, *r.Major, *r.Minor, r.Access)] = true
	}
	require.Equal(t, rules, gotRules)
	require.Empty(t, spec.Process.User.AdditionalGids, "no group is handed out, least of all gid 0")
	require.Empty(t, spec.Mounts)
	require.Empty(t, spec.Process.Env)
}

// TestHostLayoutSpecsPlainYAML reads every written file the way a tool
// without the CDI library would: a YAML decoder that rejects unknown
// fields, and a YAML-to-JSON decoder into the specs-go types.
func TestHostLayoutSpecsPlainYAML(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	for _, layout := range hostlayout.Names() {
		t.Run(layout, func(t *testing.T) {
			dir, roots := writeLayoutSpecs(t, layout)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range entries {
				data, err := os.ReadFile(filepath.Join(dir, e.Name()))
				require.NoError(t, err)

				dec := yaml.NewDecoder(bytes.NewReader(data))
				dec.KnownFields(true)
				var viaYAML specs.Spec
				require.NoError(t, dec.Decode(&viaYAML), e.Name())
				var extra any
				require.Error(t, dec.Decode(&extra), "%s: one YAML document only", e.Name())

				var viaJSON specs.Spec
				require.NoError(t, k8syaml.UnmarshalStrict(data, &viaJSON), e.Name())
				require.Equal(t, viaYAML, viaJSON, e.Name())

				require.Equal(t, cdi.DefaultKind, viaYAML.Kind)
				require.Equal(t, "0.5.0", viaYAML.Version)
				require.Len(t, viaYAML.Devices, 1)
				want, err := cdi.FileName(cdi.DefaultKind, viaYAML.Devices[0].Name)
				require.NoError(t, err)
				require.Equal(t, want, e.Name())
				for _, n := range viaYAML.Devices[0].ContainerEdits.DeviceNodes {
					require.True(t, strings.HasPrefix(n.HostPath, roots.Dev+"/"), n.HostPath)
					fi, err := os.Lstat(n.HostPath)
					require.NoError(t, err)
					require.Equal(t, os.ModeDevice|os.ModeCharDevice, fi.Mode().Type(), "%s: hostPath must be the node, not a link", n.HostPath)
					require.Equal(t, "c", n.Type)
					require.Equal(t, "rw", n.Permissions)
					require.Nil(t, n.UID)
					require.Nil(t, n.FileMode)
					var st unix.Stat_t
					require.NoError(t, unix.Stat(n.HostPath, &st))
					if st.Gid == 0 {
						require.Nil(t, n.GID, "%s: gid 0 is never written", n.HostPath)
					} else {
						require.NotNil(t, n.GID, n.HostPath)
						require.Equal(t, st.Gid, *n.GID, "%s: the host node's gid", n.HostPath)
					}
				}
			}
		})
	}
}

// hostGIDs returns the gid of every char device under roots.Dev, by
// major:minor.
func hostGIDs(t *testing.T, roots drm.Roots) map[[2]int64]uint32 {
	t.Helper()
	out := map[[2]int64]uint32{}
	require.NoError(t, filepath.WalkDir(roots.Dev, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.Type()&os.ModeCharDevice == 0 {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		out[[2]int64{int64(unix.Major(uint64(st.Rdev))), int64(unix.Minor(uint64(st.Rdev)))}] = st.Gid
		return nil
	}))
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
