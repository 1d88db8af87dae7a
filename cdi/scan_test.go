package cdi

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// specOf is a valid spec of kind with one device per name.
func specOf(kind string, names ...string) string {
	s := "cdiVersion: 0.5.0\nkind: " + kind + "\ndevices:\n"
	for _, n := range names {
		s += "  - name: " + n + "\n    containerEdits: {env: [A=1]}\n"
	}
	return s
}

func writeFiles(t *testing.T, files map[string]string) {
	t.Helper()
	for p, body := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
}

// outcome is a file of a scan as the tests compare it: "ok <devices>",
// "other kind" or "invalid".
func outcome(f SpecFile) string {
	switch {
	case errors.Is(f.Err, ErrOtherKind):
		return "other kind"
	case errors.Is(f.Err, ErrInvalidSpec):
		return "invalid"
	case f.Err != nil:
		return "error " + f.Err.Error()
	}
	var names []string
	for _, d := range f.Spec.Devices {
		names = append(names, d.Name)
	}
	return "ok " + strings.Join(names, ",")
}

func TestScan(t *testing.T) {
	base := t.TempDir()
	etc, run, missing := filepath.Join(base, "etc"), filepath.Join(base, "run"), filepath.Join(base, "missing")
	writeFiles(t, map[string]string{
		filepath.Join(etc, "net.json"):                    specOf("example.com/net", "eth"),
		filepath.Join(etc, "README"):                      "not a spec",
		filepath.Join(run, "net.json"):                    specOf("example.com/net", "eth"),
		filepath.Join(run, "broken.yaml"):                 "kind: [\n",
		filepath.Join(run, "dup-a.yaml"):                  specOf("example.com/dup", "x", "y"),
		filepath.Join(run, "dup-b.yaml"):                  specOf("example.com/dup", "x"),
		filepath.Join(run, "dup-c.yaml"):                  specOf("example.com/dup", "x"),
		filepath.Join(run, "other-kind.yaml"):             specOf("example.com/other", "x"),
		filepath.Join(run, "dri-cdi.dev-gpu_a.yaml"):      specOf(DefaultKind, "a"),
		filepath.Join(run, "dri-cdi.dev-gpu_x_b.yaml"):    specOf("dri-cdi.dev/gpu_x", "b"),
		filepath.Join(run, "dri-cdi.dev-gpu_forged.yaml"): specOf("example.com/other", "f"),
		filepath.Join(run, "subdir.yaml", "deep.yaml"):    specOf("example.com/deep", "d"),
		filepath.Join(run, "dri-cdi.dev-gpu_bad.yaml"):    "cdiVersion: 0.5.0\nkind: dri-cdi.dev/gpu\ndevices: [{name: 'bad name'}]\n",
		filepath.Join(run, "dri-cdi.dev-gpu_note.txt"):    "not a spec file name",
		filepath.Join(run, "dri-cdi.dev-gpu_json.json"):   specOf(DefaultKind, "j"),
	})

	t.Run("every file", func(t *testing.T) {
		res, err := Scan([]string{etc, run, missing})
		require.NoError(t, err)
		require.Len(t, res.Dirs, 3)
		require.NoError(t, res.Dirs[0].Err)
		require.NoError(t, res.Dirs[1].Err)
		require.ErrorIs(t, res.Dirs[2].Err, fs.ErrNotExist)
		require.ErrorContains(t, res.Dirs[2].Err, missing)

		got := map[string]string{}
		for _, f := range res.Files {
			require.Equal(t, filepath.Dir(f.Path), res.Dirs[f.Dir].Path)
			got[strings.TrimPrefix(f.Path, base+"/")] = outcome(f)
		}
		require.Equal(t, map[string]string{
			"etc/net.json":                    "ok eth",
			"run/net.json":                    "ok eth",
			"run/broken.yaml":                 "invalid",
			"run/dup-a.yaml":                  "ok x,y",
			"run/dup-b.yaml":                  "ok x",
			"run/dup-c.yaml":                  "ok x",
			"run/other-kind.yaml":             "ok x",
			"run/dri-cdi.dev-gpu_a.yaml":      "ok a",
			"run/dri-cdi.dev-gpu_x_b.yaml":    "ok b",
			"run/dri-cdi.dev-gpu_forged.yaml": "ok f",
			"run/dri-cdi.dev-gpu_bad.yaml":    "invalid",
			"run/dri-cdi.dev-gpu_json.json":   "ok j",
		}, got)
		require.Equal(t, []Duplicate{{Kind: "example.com/dup", Device: "x", Files: []string{
			filepath.Join(run, "dup-a.yaml"), filepath.Join(run, "dup-b.yaml"), filepath.Join(run, "dup-c.yaml"),
		}}}, res.Duplicates)
		require.Equal(t, []Override{{Kind: "example.com/net", Device: "eth", File: filepath.Join(etc, "net.json"), By: filepath.Join(run, "net.json")}}, res.Overrides)
	})

	t.Run("one kind", func(t *testing.T) {
		res, err := Scan([]string{run}, OnlyKind(DefaultKind))
		require.NoError(t, err)
		got := map[string]string{}
		for _, f := range res.Files {
			got[filepath.Base(f.Path)] = outcome(f)
		}
		require.Equal(t, map[string]string{
			"dri-cdi.dev-gpu_a.yaml":      "ok a",
			"dri-cdi.dev-gpu_forged.yaml": "other kind",
			"dri-cdi.dev-gpu_bad.yaml":    "invalid",
			"dri-cdi.dev-gpu_json.json":   "ok j",
		}, got)
		require.Empty(t, res.Duplicates)
	})

	t.Run("invalid kind", func(t *testing.T) {
		_, err := Scan([]string{run}, OnlyKind("nokind"))
		require.ErrorIs(t, err, ErrInvalidKind)
	})

	t.Run("unlistable dir", func(t *testing.T) {
		file := filepath.Join(etc, "net.json")
		res, err := Scan([]string{file})
		require.NoError(t, err)
		require.Error(t, res.Dirs[0].Err)
		require.NotErrorIs(t, res.Dirs[0].Err, fs.ErrNotExist)
		require.ErrorContains(t, res.Dirs[0].Err, "list CDI spec dir "+file)
		require.Empty(t, res.Files)
	})

	t.Run("resolved paths", func(t *testing.T) {
		// Results name the paths as given; only the reads go elsewhere.
		res, err := Scan([]string{"/specs"}, WithResolve(func(p string) string { return filepath.Join(run, strings.TrimPrefix(p, "/specs")) }))
		require.NoError(t, err)
		require.NoError(t, res.Dirs[0].Err)
		var bad *SpecError
		for _, f := range res.Files {
			require.True(t, strings.HasPrefix(f.Path, "/specs/"), f.Path)
			if f.Path == "/specs/broken.yaml" {
				require.ErrorAs(t, f.Err, &bad)
			}
		}
		require.NotNil(t, bad)
		require.NotContains(t, bad.Error(), run, "the message names the file as given")
		require.Equal(t, "invalid CDI spec file /specs/broken.yaml: "+bad.Reason(), bad.Error())
	})
}
