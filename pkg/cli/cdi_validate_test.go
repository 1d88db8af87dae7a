package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

func TestCDIValidate(t *testing.T) {
	etc, run_, missing := specDirs(t)
	repl := []string{filepath.Dir(etc), "<base>"}
	r := run(t, nil, "cdi", "validate", "--spec-dir", etc+":"+run_+":"+missing)
	require.Equal(t, ExitError, r.code)
	golden(t, "cdi-validate.stdout", r.stdout, repl...)
	golden(t, "cdi-validate.stderr", r.stderr, repl...)
	for _, s := range []string{
		filepath.Join(run_, "broken.yaml") + ": ",
		filepath.Join(run_, "dup-a.yaml") + ": device example.com/dup=x is also defined in " + filepath.Join(run_, "dup-b.yaml"),
		filepath.Join(run_, "dup-b.yaml") + ": device example.com/dup=x is also defined in " + filepath.Join(run_, "dup-a.yaml"),
		"note: device example.com/net=eth in " + filepath.Join(etc, "net.json") + " is overridden by " + filepath.Join(run_, "net.json"),
		"dri-cdi: cdi validate: 3 problems found",
	} {
		require.Contains(t, r.stderr, s)
	}
}

func TestCDIValidateCases(t *testing.T) {
	good := func(t *testing.T, dir string) {
		w, err := cdi.NewWriter(dir, cdi.DefaultKind)
		require.NoError(t, err)
		_, err = w.Sync([]drm.Card{testCard("0000:00:02.0", 0, 128)})
		require.NoError(t, err)
	}
	write := func(name, content string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			good(t, dir)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
		}
	}
	cases := map[string]struct {
		setup  func(t *testing.T, dir string)
		code   int
		stdout []string
		stderr []string
	}{
		"agent output is valid": {
			setup: good, code: ExitOK,
			stdout: []string{"ok ", "dri-cdi.dev-gpu_all.yaml: dri-cdi.dev/gpu=all", "dri-cdi.dev-gpu_0000-00-02.0.yaml: dri-cdi.dev/gpu=0000:00:02.0"},
		},
		"empty dir": {setup: func(*testing.T, string) {}, code: ExitOK, stderr: []string{"no spec files in "}},
		"not yaml": {
			setup: write("dri-cdi.dev-gpu_x.yaml", "kind: [unclosed\n"), code: ExitError,
			stderr: []string{"dri-cdi.dev-gpu_x.yaml: failed to parse CDI Spec: failed to unmarshal CDI Spec: yaml: ", "1 problems found"},
		},
		"unknown field": {
			setup: write("x.yaml", "cdiVersion: 0.5.0\nkind: a.com/b\nfrobs: 1\ndevices: []\n"), code: ExitError,
			stderr: []string{"x.yaml: ", "field frobs not found"},
		},
		"version too old for content": {
			setup: write("x.yaml", "cdiVersion: 0.3.0\nkind: a.com/b\ndevices: [{name: d, containerEdits: {deviceNodes: [{path: /dev/x, hostPath: /dev/y}]}}]\n"), code: ExitError,
			stderr: []string{"x.yaml: ", "the spec version must be at least v0.5.0"},
		},
		"empty file": {
			setup: write("x.json", ""), code: ExitError,
			stderr: []string{"x.json: "},
		},
		"our device redefined in another file": {
			setup: write("copy.yaml", "cdiVersion: 0.5.0\nkind: dri-cdi.dev/gpu\ndevices: [{name: all, containerEdits: {env: [A=1]}}]\n"), code: ExitError,
			stderr: []string{"copy.yaml: device dri-cdi.dev/gpu=all is also defined in ", "dri-cdi.dev-gpu_all.yaml: device dri-cdi.dev/gpu=all is also defined in ", "2 problems found"},
		},
		"same name, other kind is fine": {
			setup: write("other.yaml", "cdiVersion: 0.5.0\nkind: dri-cdi.dev/display\ndevices: [{name: all, containerEdits: {env: [A=1]}}]\n"), code: ExitOK,
			stdout: []string{"other.yaml: dri-cdi.dev/display=all"},
		},
		"spec dir is a file": {
			setup: func(t *testing.T, dir string) {
				require.NoError(t, os.Remove(dir))
				require.NoError(t, os.WriteFile(dir, nil, 0o644))
			},
			code: ExitError, stderr: []string{": cannot list spec dir: ", "not a directory"},
		},
		"missing dir": {
			setup: func(t *testing.T, dir string) { require.NoError(t, os.Remove(dir)) },
			code:  ExitOK, stderr: []string{"no spec files in "},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cdi")
			require.NoError(t, os.Mkdir(dir, 0o755))
			tc.setup(t, dir)
			r := run(t, nil, "cdi", "validate", "--spec-dir", dir)
			require.Equal(t, tc.code, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			for _, s := range tc.stdout {
				require.Contains(t, r.stdout, s)
			}
			for _, s := range tc.stderr {
				require.Contains(t, r.stderr, s)
			}
			if tc.code == ExitOK && len(tc.stderr) == 0 {
				require.Empty(t, r.stderr)
			}
		})
	}
}
