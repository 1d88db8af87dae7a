package cdi

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenCases are the card sets whose generated specs are kept in
// testdata/generate/<case>/.
var goldenCases = map[string]struct {
	kind  string
	cards []drm.Card
	// devices are the qualified names a runtime must resolve.
	devices []string
}{
	"i915": {
		kind:    DefaultKind,
		cards:   []drm.Card{i915("0000:00:02.0", 0, 128)},
		devices: []string{"dri-cdi.dev/gpu=0000:00:02.0", "dri-cdi.dev/gpu=all"},
	},
	"amdgpu-two-cards-share-kfd": {
		kind:    DefaultKind,
		cards:   []drm.Card{amdgpu("0000:04:00.0", 2, 129), amdgpu("0000:03:00.0", 1, 128)},
		devices: []string{"dri-cdi.dev/gpu=0000:03:00.0", "dri-cdi.dev/gpu=0000:04:00.0", "dri-cdi.dev/gpu=all"},
	},
	"hybrid-simpledrm-owns-card0": {
		kind: DefaultKind,
		cards: []drm.Card{
			platformCard("simple-framebuffer.0", "simpledrm", 0, -1),
			i915("0000:00:02.0", 1, 128),
			pciCard("0000:01:00.0", "xe", "8086", "e20b", 2, 129),
			pciCard("0000:00:05.0", "virtio_gpu", "1af4", "1050", 3, 130),
			platformCard("vkms", "vkms", 4, 131),
		},
		devices: []string{
			"dri-cdi.dev/gpu=0000:00:02.0", "dri-cdi.dev/gpu=0000:00:05.0", "dri-cdi.dev/gpu=0000:01:00.0",
			"dri-cdi.dev/gpu=all", "dri-cdi.dev/gpu=simple-framebuffer.0", "dri-cdi.dev/gpu=vkms",
		},
	},
	"npu-next-to-gpus": {
		kind: DefaultKind,
		cards: []drm.Card{
			i915("0000:00:02.0", 0, 128),
			accelCard("0000:00:0b.0", "intel_vpu", "pci", 0),
			platformCard("fb000000.gpu", "panthor", 1, 129),
			accelCard("fdab0000.npu", "rocket", "platform", 1),
		},
		devices: []string{
			"dri-cdi.dev/gpu=0000:00:02.0", "dri-cdi.dev/gpu=0000:00:0b.0", "dri-cdi.dev/gpu=all",
			"dri-cdi.dev/gpu=fb000000.gpu", "dri-cdi.dev/gpu=fdab0000.npu",
		},
	},
	"custom-kind": {
		kind:    "example.com/display",
		cards:   []drm.Card{platformCard("vkms", "vkms", 0, 128)},
		devices: []string{"example.com/display=all", "example.com/display=vkms"},
	},
}

func TestGenerateGolden(t *testing.T) {
	for name, tc := range goldenCases {
		t.Run(name, func(t *testing.T) {
			files, err := Generate(tc.kind, tc.cards)
			require.NoError(t, err)
			dir := filepath.Join("testdata", "generate", name)
			if *update {
				require.NoError(t, os.RemoveAll(dir))
				require.NoError(t, os.MkdirAll(dir, 0o755))
				for _, f := range files {
					require.NoError(t, os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644))
				}
			}
			entries, err := os.ReadDir(dir)
			require.NoError(t, err, "golden dir missing; run go test ./cdi -run TestGenerateGolden -update")
			var golden []string
			for _, e := range entries {
				golden = append(golden, e.Name())
			}
			var got []string
			for _, f := range files {
				got = append(got, f.Name)
				want, err := os.ReadFile(filepath.Join(dir, f.Name))
				require.NoError(t, err)
				require.Equal(t, string(want), string(f.Data), "file %s differs from golden", f.Name)
			}
			require.Equal(t, golden, got, "generated file set differs from golden")
		})
	}
}

// TestGenerateAcceptedByRuntimeCache loads the generated files the way a
// container runtime does (a CDI cache over the directory) and injects
// each device into an OCI spec.
func TestGenerateAcceptedByRuntimeCache(t *testing.T) {
	for name, tc := range goldenCases {
		t.Run(name, func(t *testing.T) {
			cache, _, files := runtimeCache(t, tc.kind, tc.cards)
			for _, f := range files {
				spec := cache.GetDevice(QualifiedName(tc.kind, f.Device)).GetSpec()
				require.Equal(t, "0.5.0", spec.Version, "%s: hostPath and digit-led names need 0.5.0, nothing more", f.Name)
			}
			require.Equal(t, tc.devices, cache.ListDevices())

			for _, qualified := range tc.devices {
				ociSpec := &oci.Spec{Process: &oci.Process{User: oci.User{UID: 1000, GID: 1000}}}
				unresolved, err := cache.InjectDevices(ociSpec, qualified)
				require.NoError(t, err)
				require.Empty(t, unresolved)
				require.NotEmpty(t, ociSpec.Linux.Devices)
				for _, d := range ociSpec.Linux.Devices {
					require.Equal(t, "c", d.Type)
					// No uid in the spec: the library hands each node to
					// the non-root container user; the gid is the host
					// node's (44 in the test cards).
					require.NotNil(t, d.UID, d.Path)
					require.NotNil(t, d.GID, d.Path)
					require.Equal(t, uint32(1000), *d.UID, d.Path)
					require.Equal(t, uint32(44), *d.GID, d.Path)
					require.Contains(t, ociSpec.Linux.Resources.Devices, oci.LinuxDeviceCgroup{
						Allow: true, Type: "c", Major: &d.Major, Minor: &d.Minor, Access: "rw",
					})
				}
			}
		})
	}
}

// TestGenerateRootProcessGetsHostGroup: a root-started process gets the
// host node's group (an image that joins the node's group before dropping
// privileges joins render, not root), and a root-owned host node gives
// root:root, with no gid 0 ever written into a spec.
func TestGenerateRootProcessGetsHostGroup(t *testing.T) {
	rootOwned := i915("0000:00:03.0", 1, 129)
	rootOwned.CardNode.GID = 0
	rootOwned.RenderNode.GID = 0
	for i := range rootOwned.ByPath {
		rootOwned.ByPath[i].GID = 0
	}
	cache, _, _ := runtimeCache(t, DefaultKind, []drm.Card{i915("0000:00:02.0", 0, 128), rootOwned})

	ociSpec := &oci.Spec{Process: &oci.Process{User: oci.User{UID: 0, GID: 0}}}
	_, err := cache.InjectDevices(ociSpec, QualifiedName(DefaultKind, "0000:00:02.0"))
	require.NoError(t, err)
	require.NotEmpty(t, ociSpec.Linux.Devices)
	for _, d := range ociSpec.Linux.Devices {
		require.Nil(t, d.UID, "uid 0 stays open: root, as on the host")
		require.NotNil(t, d.GID, d.Path)
		require.Equal(t, uint32(44), *d.GID, "%s: the host node's group, not gid 0", d.Path)
	}
	require.Empty(t, ociSpec.Process.User.AdditionalGids)

	ociSpec = &oci.Spec{Process: &oci.Process{User: oci.User{UID: 0, GID: 0}}}
	_, err = cache.InjectDevices(ociSpec, QualifiedName(DefaultKind, "0000:00:03.0"))
	require.NoError(t, err)
	require.NotEmpty(t, ociSpec.Linux.Devices)
	for _, d := range ociSpec.Linux.Devices {
		require.Nil(t, d.UID, d.Path)
		require.Nil(t, d.GID, "%s: a host gid of 0 is never written into the spec", d.Path)
	}
}

// TestGenerateModeFollowsHostNode shows why fileMode is left out: the
// library copies the mode of the host node at injection time.
func TestGenerateModeFollowsHostNode(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	dev := t.TempDir()
	host := filepath.Join(dev, "renderD128")
	require.NoError(t, unix.Mknod(host, unix.S_IFCHR|0o640, int(unix.Mkdev(226, 128))))
	require.NoError(t, os.Chmod(host, 0o640))
	link := filepath.Join(dev, "platform-vkms-render")
	require.NoError(t, os.Symlink("renderD128", link))
	c := platformCard("vkms", "vkms", 0, 128)
	c.RenderNode.HostPath = host
	c.ByPath = []drm.DeviceNode{{Path: "/dev/dri/by-path/platform-vkms-render", HostPath: link, Major: 226, Minor: 128}}
	cache, _, _ := runtimeCache(t, DefaultKind, []drm.Card{c})
	ociSpec := &oci.Spec{Process: &oci.Process{User: oci.User{UID: 1000, GID: 1000}}}
	_, err := cache.InjectDevices(ociSpec, QualifiedName(DefaultKind, "vkms"))
	require.NoError(t, err)
	found := 0
	for _, d := range ociSpec.Linux.Devices {
		if d.Path == "/dev/dri/renderD128" || d.Path == "/dev/dri/by-path/platform-vkms-render" {
			found++
			require.NotNil(t, d.FileMode, d.Path)
			require.Equal(t, os.FileMode(0o640), d.FileMode.Perm(), d.Path)
		}
	}
	require.Equal(t, 2, found)
}

func TestGenerateAllDeviceHoldsEveryNodeOnce(t *testing.T) {
	cards := []drm.Card{amdgpu("0000:03:00.0", 1, 128), amdgpu("0000:04:00.0", 2, 129), i915("0000:00:02.0", 0, 130)}
	files, err := Generate(DefaultKind, cards)
	require.NoError(t, err)
	require.Len(t, files, 4)
	all := files[len(files)-1]
	require.Equal(t, "dri-cdi.dev-gpu_all.yaml", all.Name)
	require.Equal(t, AllDevice, all.Device)
	var paths []string
	for _, n := range all.Spec.Devices[0].ContainerEdits.DeviceNodes {
		paths = append(paths, n.Path)
	}
	var want []string
	seen := map[string]bool{}
	for _, c := range cards {
		for _, n := range c.Nodes() {
			if !seen[n.Path] {
				seen[n.Path] = true
				want = append(want, n.Path)
			}
		}
	}
	require.ElementsMatch(t, want, paths)
	require.Equal(t, 1, countOf(paths, "/dev/kfd"))
	for _, f := range files[:3] {
		require.Len(t, f.Spec.Devices, 1)
		require.Equal(t, f.Device, f.Spec.Devices[0].Name)
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

func TestGenerateIsDeterministic(t *testing.T) {
	cards := manyCards(16)
	first, err := Generate(DefaultKind, cards)
	require.NoError(t, err)
	reversed := slices.Clone(cards)
	slices.Reverse(reversed)
	second, err := Generate(DefaultKind, reversed)
	require.NoError(t, err)
	require.Equal(t, len(first), len(second))
	for i := range first {
		require.Equal(t, first[i].Name, second[i].Name)
		require.Equal(t, string(first[i].Data), string(second[i].Data))
	}
}

func TestGenerateNoCards(t *testing.T) {
	files, err := Generate(DefaultKind, nil)
	require.NoError(t, err)
	require.Empty(t, files)
}

func TestGenerateErrors(t *testing.T) {
	withRender := func(c drm.Card, mutate func(*drm.Card)) drm.Card { mutate(&c); return c }
	cases := map[string]struct {
		kind     string
		cards    []drm.Card
		sentinel error
		want     string
	}{
		"id all": {
			cards: []drm.Card{platformCard("all", "vkms", 0, 128)}, sentinel: ErrInvalidCard,
			want: `invalid card "all": the name is reserved`,
		},
		"id with slash": {
			cards: []drm.Card{platformCard("a/b", "vkms", 0, 128)}, sentinel: ErrInvalidCard,
			want: `invalid card "a/b": not a valid CDI device name`,
		},
		"empty id": {
			cards: []drm.Card{platformCard("", "vkms", 0, 128)}, sentinel: ErrInvalidCard,
			want: `invalid card "": not a valid CDI device name`,
		},
		"id ends with colon": {
			cards: []drm.Card{platformCard("vkms:", "vkms", 0, 128)}, sentinel: ErrInvalidCard,
			want: `invalid card "vkms:"`,
		},
		"duplicate id": {
			cards: []drm.Card{i915("0000:00:02.0", 0, 128), i915("0000:00:02.0", 1, 129)}, sentinel: ErrInvalidCard,
			want: `invalid card "0000:00:02.0": listed twice`,
		},
		"file name collision": {
			cards: []drm.Card{i915("0000:00:02.0", 0, 128), platformCard("0000-00-02.0", "vkms", 1, 129)}, sentinel: ErrInvalidCard,
			want: `its spec file dri-cdi.dev-gpu_0000-00-02.0.yaml is also the file of card`,
		},
		"relative container path": {
			cards:    []drm.Card{withRender(i915("0000:00:02.0", 0, 128), func(c *drm.Card) { c.CardNode.Path = "dri/card0" })},
			sentinel: ErrInvalidCard, want: `node path "dri/card0" is not a clean absolute path under /dev`,
		},
		"path escapes dev": {
			cards:    []drm.Card{withRender(i915("0000:00:02.0", 0, 128), func(c *drm.Card) { c.CardNode.Path = "/dev/../etc/passwd" })},
			sentinel: ErrInvalidCard, want: `not a clean absolute path under /dev`,
		},
		"relative host path": {
			cards:    []drm.Card{withRender(i915("0000:00:02.0", 0, 128), func(c *drm.Card) { c.RenderNode.HostPath = "renderD128" })},
			sentinel: ErrInvalidCard, want: `node /dev/dri/renderD128: host path "renderD128" is not absolute`,
		},
		"major zero": {
			cards:    []drm.Card{withRender(i915("0000:00:02.0", 0, 128), func(c *drm.Card) { c.RenderNode.Major = 0 })},
			sentinel: ErrInvalidCard, want: `node /dev/dri/renderD128: major number 0`,
		},
		"same path two numbers in one card": {
			cards: []drm.Card{withRender(i915("0000:00:02.0", 0, 128), func(c *drm.Card) {
				c.Extra = []drm.DeviceNode{node("/dev/dri/card0", 226, 7)}
			})},
			sentinel: ErrInvalidCard, want: `node /dev/dri/card0 listed as 226:0 and 226:7`,
		},
		"two cards claim one node": {
			cards: []drm.Card{i915("0000:00:02.0", 0, 128), withRender(i915("0000:00:03.0", 0, 129), func(c *drm.Card) {
				c.CardNode.Minor = 5
				c.ByPath[0].Minor = 5
			})},
			sentinel: ErrInvalidCard, want: `invalid card "0000:00:03.0": node /dev/dri/card0 is 226:5, but another card has it as 226:0`,
		},
		"kind without class": {
			kind: "dri-cdi.dev", cards: []drm.Card{i915("0000:00:02.0", 0, 128)}, sentinel: ErrInvalidKind,
			want: `invalid CDI kind "dri-cdi.dev": want <vendor>/<class>`,
		},
		"kind with bad vendor": {
			kind: "-x/gpu", cards: []drm.Card{i915("0000:00:02.0", 0, 128)}, sentinel: ErrInvalidKind,
			want: `invalid CDI kind "-x/gpu": invalid vendor`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kind := tc.kind
			if kind == "" {
				kind = DefaultKind
			}
			files, err := Generate(kind, tc.cards)
			require.Error(t, err)
			require.Nil(t, files)
			require.True(t, errors.Is(err, tc.sentinel), "error %v does not wrap %v", err, tc.sentinel)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestFileName(t *testing.T) {
	cases := map[string]struct{ kind, device, want string }{
		"pci":      {DefaultKind, "0000:00:02.0", "dri-cdi.dev-gpu_0000-00-02.0.yaml"},
		"platform": {DefaultKind, "simple-framebuffer.0", "dri-cdi.dev-gpu_simple-framebuffer.0.yaml"},
		"all":      {DefaultKind, AllDevice, "dri-cdi.dev-gpu_all.yaml"},
		"custom":   {"example.com/display", "vkms", "example.com-display_vkms.yaml"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := FileName(tc.kind, tc.device)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	require.Equal(t, "dri-cdi.dev/gpu=0000:00:02.0", QualifiedName(DefaultKind, "0000:00:02.0"))
}

// FuzzGenerate checks that whatever Generate accepts, the CDI library
// accepts too, and that what it rejects is explained.
func FuzzGenerate(f *testing.F) {
	f.Add("0000:00:02.0", "/dev/dri/card0", uint32(226), uint32(0))
	f.Add("vkms", "/dev/dri/by-path/platform-vkms-card", uint32(226), uint32(1))
	f.Add("all", "/dev/kfd", uint32(235), uint32(0))
	f.Add("a:b", "/dev//x", uint32(0), uint32(5))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, id, path string, major, minor uint32) {
		c := drm.Card{ID: id, CardNode: drm.DeviceNode{Path: path, HostPath: "/h" + path, Major: major, Minor: minor}}
		files, err := Generate(DefaultKind, []drm.Card{c})
		if err != nil {
			require.True(t, errors.Is(err, ErrInvalidCard), "unexplained error %v", err)
			return
		}
		require.Len(t, files, 2)
		for _, f := range files {
			p := filepath.Join(dir, "spec.yaml")
			require.NoError(t, os.WriteFile(p, f.Data, 0o644))
			spec, err := cdilib.ReadSpec(p, 0)
			require.NoError(t, err, "generated spec rejected by the CDI library:\n%s", f.Data)
			require.Equal(t, DefaultKind, spec.Kind)
		}
	})
}

// runtimeCache writes the spec files of cards of kind to a fresh
// directory and loads it into a CDI library cache, as a runtime would.
// Every file must load.
func runtimeCache(t *testing.T, kind string, cards []drm.Card) (cache *cdilib.Cache, dir string, files []File) {
	t.Helper()
	files, err := Generate(kind, cards)
	require.NoError(t, err)
	dir = t.TempDir()
	for _, f := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644))
	}
	cache, err = cdilib.NewCache(cdilib.WithSpecDirs(dir), cdilib.WithAutoRefresh(false))
	require.NoError(t, err)
	require.Empty(t, cache.GetErrors())
	return cache, dir, files
}
