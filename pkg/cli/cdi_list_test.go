package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

const nvidiaSpec = `cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
  - name: "0"
    containerEdits:
      deviceNodes: [{path: /dev/nvidia0, type: c, major: 195, minor: 0}]
  - name: "1"
    containerEdits:
      deviceNodes: [{path: /dev/nvidia1, type: c, major: 195, minor: 1}]
`

func netSpec(iface string) string {
	return `{"cdiVersion": "0.5.0", "kind": "example.com/net", "devices": [{"name": "eth", "containerEdits": {"env": ["IFACE=` + iface + `"]}}]}`
}

const dupSpec = `cdiVersion: 0.5.0
kind: example.com/dup
devices:
  - name: x
    containerEdits:
      env: [A=1]
`

// specDirs builds two spec dirs like /etc/cdi and /var/run/cdi:
//
//   - etc: an NVIDIA spec and example.com/net=eth (overridden by run);
//   - run: dri-cdi's specs for two cards, example.com/net=eth, a broken
//     file, and example.com/dup=x defined by two files;
//   - a missing dir.
func specDirs(t *testing.T) (etc, run, missing string) {
	t.Helper()
	base := t.TempDir()
	etc, run, missing = filepath.Join(base, "etc"), filepath.Join(base, "run"), filepath.Join(base, "missing")
	files := map[string]string{
		filepath.Join(etc, "nvidia.yaml"):           nvidiaSpec,
		filepath.Join(etc, "net.json"):              netSpec("eth0"),
		filepath.Join(etc, "README"):                "not a spec",
		filepath.Join(run, "net.json"):              netSpec("eth1"),
		filepath.Join(run, "broken.yaml"):           "cdiVersion: 0.5.0\nkind: example.com/broken\ndevices: [{name: bad name}]\n",
		filepath.Join(run, "dup-a.yaml"):            dupSpec,
		filepath.Join(run, "dup-b.yaml"):            dupSpec,
		filepath.Join(run, "subdir.yaml", "x.yaml"): nvidiaSpec, // not scanned
	}
	for p, c := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(c), 0o644))
	}
	w, err := cdi.NewWriter(run, cdi.DefaultKind)
	require.NoError(t, err)
	_, err = w.Sync([]drm.Card{testCard("0000:00:02.0", 0, 128), testCard("vkms", 1, 129)})
	require.NoError(t, err)
	return etc, run, missing
}

// testCard is a card with a card and a render node, no root needed.
func testCard(id string, card, render uint32) drm.Card {
	r := drm.DeviceNode{Path: "/dev/dri/renderD" + itoa(render), HostPath: "/dev/dri/renderD" + itoa(render), Major: 226, Minor: render}
	return drm.Card{
		ID: id, Driver: "test", NUMANode: -1,
		CardNode:   drm.DeviceNode{Path: "/dev/dri/card" + itoa(card), HostPath: "/dev/dri/card" + itoa(card), Major: 226, Minor: card},
		RenderNode: &r,
	}
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

func TestCDIList(t *testing.T) {
	etc, run_, missing := specDirs(t)
	dirs := etc + ":" + run_ + ":" + missing
	repl := []string{filepath.Dir(etc), "<base>"}

	r := run(t, nil, "cdi", "list", "--spec-dir", dirs)
	require.Equal(t, ExitOK, r.code, r.stderr)
	golden(t, "cdi-list.text", r.stdout, repl...)
	golden(t, "cdi-list.stderr", r.stderr, repl...)

	r = run(t, nil, "cdi", "list", "--spec-dir", etc, "--spec-dir", run_, "--spec-dir", missing, "-o", "json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	golden(t, "cdi-list.json", r.stdout, repl...)
	var got []struct{ Name, Spec string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	byName := map[string]string{}
	for _, d := range got {
		byName[d.Name] = d.Spec
	}
	require.Equal(t, filepath.Join(run_, "net.json"), byName["example.com/net=eth"], "the later dir wins")
	require.NotContains(t, byName, "example.com/dup=x", "a name defined twice in one dir is dropped")
	require.Contains(t, byName, "dri-cdi.dev/gpu=all")
	require.Contains(t, byName, "nvidia.com/gpu=1")

	// The same dirs through the environment.
	env := run(t, map[string]string{"DRI_CDI_SPEC_DIR": dirs}, "cdi", "list")
	require.Equal(t, ExitOK, env.code)
	golden(t, "cdi-list.text", env.stdout, repl...)
}

func TestCDIListErrors(t *testing.T) {
	_, good, _ := specDirs(t)
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	cases := map[string]struct {
		dirs   []string
		code   int
		stdout string
		stderr []string
	}{
		"only missing dirs": {dirs: []string{"/nonexistent/a", "/nonexistent/b"}, code: ExitOK, stdout: ""},
		"dir is a file":     {dirs: []string{file}, code: ExitError, stderr: []string{"error: spec dir " + file + ": ", "not a directory", "1 spec directories could not be read"}},
		"unreadable dir does not hide the others": {
			dirs: []string{file, good}, code: ExitError,
			stdout: "dri-cdi.dev/gpu=0000:00:02.0\ndri-cdi.dev/gpu=all\ndri-cdi.dev/gpu=vkms\nexample.com/net=eth\n",
			stderr: []string{"spec dir " + file},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			args := []string{"cdi", "list"}
			for _, d := range tc.dirs {
				args = append(args, "--spec-dir", d)
			}
			r := run(t, nil, args...)
			require.Equal(t, tc.code, r.code, r.stderr)
			require.Equal(t, tc.stdout, r.stdout)
			for _, s := range tc.stderr {
				require.Contains(t, r.stderr, s)
			}
		})
	}
}
