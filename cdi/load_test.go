package cdi

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

func writeSpecs(t *testing.T, dir string, kind string, cards ...drm.Card) {
	t.Helper()
	w, err := NewWriter(dir, kind)
	require.NoError(t, err)
	_, err = w.Sync(cards)
	require.NoError(t, err)
}

// specNodes is what LoadDevices returns for a card: its nodes, each path
// once, without the host node's mode and uid (specs do not carry them) but
// with its gid, by-path links with the host path and gid of the node they
// point to.
func specNodes(c drm.Card) []drm.DeviceNode {
	var out []drm.DeviceNode
	seen := map[string]bool{}
	links := map[string]bool{}
	for _, n := range c.ByPath {
		links[n.Path] = true
	}
	for _, n := range c.Nodes() {
		if seen[n.Path] {
			continue
		}
		seen[n.Path] = true
		if links[n.Path] {
			for _, real := range c.Nodes() {
				if !links[real.Path] && real.Major == n.Major && real.Minor == n.Minor {
					n.HostPath, n.GID = real.HostPath, real.GID
					break
				}
			}
		}
		n.Mode, n.UID = 0, 0
		out = append(out, n)
	}
	return out
}

func TestLoadDevices(t *testing.T) {
	a, b := i915("0000:00:02.0", 0, 128), amdgpu("0000:03:00.0", 1, 129)
	kfdOnce := append(specNodes(a), specNodes(b)...)
	good := map[string][]drm.DeviceNode{
		"0000:00:02.0": specNodes(a),
		"0000:03:00.0": specNodes(b),
		"all":          kfdOnce,
	}
	cases := map[string]struct {
		setup func(t *testing.T, dir string)
		want  map[string][]drm.DeviceNode
		errs  []string // substrings; each must name the file
	}{
		"missing dir": {
			setup: func(t *testing.T, dir string) { require.NoError(t, os.Remove(dir)) },
			want:  map[string][]drm.DeviceNode{},
		},
		"empty dir": {
			setup: func(t *testing.T, dir string) {},
			want:  map[string][]drm.DeviceNode{},
		},
		"written by the writer": {
			setup: func(t *testing.T, dir string) { writeSpecs(t, dir, DefaultKind, a, b) },
			want:  good,
		},
		"other kinds and vendors are ignored": {
			setup: func(t *testing.T, dir string) {
				writeSpecs(t, dir, DefaultKind, a, b)
				writeSpecs(t, dir, "dri-cdi.dev/gpu_x", platformCard("vkms", "vkms", 5, 135))
				writeSpecs(t, dir, "vendor.com/gpu", platformCard("vkms", "vkms", 5, 135))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "garbage.yaml"), []byte("{{{"), 0o644))
				require.NoError(t, os.Mkdir(filepath.Join(dir, "dri-cdi.dev-gpu_dir.yaml"), 0o755))
			},
			want: good,
		},
		"malformed file does not hide the good ones": {
			setup: func(t *testing.T, dir string) {
				writeSpecs(t, dir, DefaultKind, a, b)
				require.NoError(t, os.WriteFile(filepath.Join(dir, "dri-cdi.dev-gpu_broken.yaml"), []byte("cdiVersion: 0.5.0\nkind: [\n"), 0o644))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "dri-cdi.dev-gpu_unknown-field.yaml"),
					[]byte("cdiVersion: 0.5.0\nkind: dri-cdi.dev/gpu\nbogus: 1\ndevices: []\n"), 0o644))
			},
			want: good,
			errs: []string{"dri-cdi.dev-gpu_broken.yaml", "dri-cdi.dev-gpu_unknown-field.yaml"},
		},
		"invalid spec is rejected as a whole": {
			setup: func(t *testing.T, dir string) {
				writeSpecs(t, dir, DefaultKind, a)
				require.NoError(t, os.WriteFile(filepath.Join(dir, "dri-cdi.dev-gpu_bad.yaml"), []byte(`cdiVersion: 0.5.0
kind: dri-cdi.dev/gpu
devices:
  - name: good
    containerEdits:
      deviceNodes: [{path: /dev/dri/card7, type: c, major: 226, minor: 7}]
  - name: "bad name!"
    containerEdits:
      deviceNodes: [{path: /dev/dri/card8, type: c, major: 226, minor: 8}]
`), 0o644))
			},
			want: map[string][]drm.DeviceNode{"0000:00:02.0": specNodes(a), "all": specNodes(a)},
			errs: []string{"dri-cdi.dev-gpu_bad.yaml"},
		},
		"node without numbers": {
			setup: func(t *testing.T, dir string) {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "dri-cdi.dev-gpu_nonum.yaml"), []byte(`cdiVersion: 0.5.0
kind: dri-cdi.dev/gpu
devices:
  - name: nonum
    containerEdits:
      deviceNodes: [{path: /dev/dri/card7}]
`), 0o644))
			},
			want: map[string][]drm.DeviceNode{},
			errs: []string{`dri-cdi.dev-gpu_nonum.yaml: device "nonum": node /dev/dri/card7: device number 0:0`},
		},
		"hand-written spec with owner and mode": {
			setup: func(t *testing.T, dir string) {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "dri-cdi.dev-gpu_hand.yaml"), []byte(`cdiVersion: 0.5.0
kind: dri-cdi.dev/gpu
containerEdits:
  deviceNodes: [{path: /dev/kfd, type: c, major: 235}]
devices:
  - name: hand
    containerEdits:
      deviceNodes: [{path: /dev/dri/card7, type: c, major: 226, minor: 7, fileMode: 0o640, uid: 3, gid: 44}]
`), 0o644))
			},
			want: map[string][]drm.DeviceNode{"hand": {
				{Path: "/dev/kfd", HostPath: "/dev/kfd", Major: 235},
				{Path: "/dev/dri/card7", HostPath: "/dev/dri/card7", Major: 226, Minor: 7, Mode: 0o640, UID: 3, GID: 44},
			}},
		},
		"device in two files is dropped": {
			setup: func(t *testing.T, dir string) {
				writeSpecs(t, dir, DefaultKind, a, b)
				data, err := os.ReadFile(filepath.Join(dir, "dri-cdi.dev-gpu_0000-00-02.0.yaml"))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, "dri-cdi.dev-gpu_zz-copy.yaml"), data, 0o644))
			},
			want: map[string][]drm.DeviceNode{"0000:03:00.0": specNodes(b), "all": kfdOnce},
			errs: []string{`dri-cdi.dev-gpu_zz-copy.yaml: device "0000:00:02.0" is also defined in `},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			got, err := LoadDevices(dir, DefaultKind)
			require.Equal(t, tc.want, got)
			if len(tc.errs) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrInvalidSpec))
			for _, e := range tc.errs {
				require.Contains(t, err.Error(), e)
			}
			require.Len(t, strings.Split(err.Error(), "\n"), len(tc.errs), "one line per bad file: %v", err)
		})
	}
}

func TestLoadDevicesErrors(t *testing.T) {
	_, err := LoadDevices(t.TempDir(), "nokind")
	require.ErrorIs(t, err, ErrInvalidKind)

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	got, err := LoadDevices(file, DefaultKind)
	require.Nil(t, got)
	require.ErrorContains(t, err, "list CDI spec dir "+file)
}

// FuzzLoadDevices feeds arbitrary bytes as a spec file next to a good
// one: LoadDevices must not panic, must keep the good file, and must
// either use every device of the fuzzed file or explain why not.
func FuzzLoadDevices(f *testing.F) {
	files, err := Generate(DefaultKind, []drm.Card{amdgpu("0000:03:00.0", 1, 129)})
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		f.Add(file.Data)
	}
	f.Add([]byte("cdiVersion: 0.5.0\nkind: dri-cdi.dev/gpu\ndevices: [{name: x, containerEdits: {deviceNodes: [{path: /dev/x, major: -1}]}}]\n"))
	f.Add([]byte("cdiVersion: 0.5.0\nkind: dri-cdi.dev/gpu\ndevices: [{name: y, containerEdits: {deviceNodes: [{path: /dev/y, type: b, major: 8}]}}]\n"))
	f.Add([]byte("cdiVersion: 9\n"))
	f.Add([]byte{})
	dir := f.TempDir()
	goodCard := platformCard("vkms", "vkms", 0, 128)
	good, err := Generate(DefaultKind, []drm.Card{goodCard})
	if err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, good[1].Name), good[1].Data, 0o644); err != nil {
		f.Fatal(err)
	}
	fuzzed := filepath.Join(dir, "dri-cdi.dev-gpu_fuzz.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		require.NoError(t, os.WriteFile(fuzzed, data, 0o644))
		got, err := LoadDevices(dir, DefaultKind)
		require.Equal(t, specNodes(goodCard), got["vkms"], "the good file was lost")
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidSpec)
			require.Contains(t, err.Error(), "dri-cdi.dev-gpu_")
		}
		for name, nodes := range got {
			for _, n := range nodes {
				require.NotZero(t, n.Major, "device %s node %s", name, n.Path)
				require.NotEmpty(t, n.HostPath)
			}
		}
	})
}
