package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	require.NoError(t, Write(path, []byte("one"), 0o644))
	require.NoError(t, Write(path, []byte("two"), 0o600))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "two", string(data))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the mode is set, whatever the umask or the old file")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left")
}

func TestWriteCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	require.NoError(t, Write(path, []byte("old"), 0o644))
	var seen string
	refused := errors.New("refused")
	err := Write(path, []byte("new"), 0o644, WithCheck(func(tmp string) error {
		b, err := os.ReadFile(tmp)
		require.NoError(t, err)
		seen = string(b)
		_, _, isTemp := ParseTemp(filepath.Base(tmp))
		require.True(t, isTemp, tmp)
		return refused
	}))
	require.ErrorIs(t, err, refused)
	require.ErrorContains(t, err, path)
	require.Equal(t, "new", seen, "the check reads the complete new content")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "old", string(data), "a refused file leaves the target alone")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the refused temporary file is removed")
}

func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	err := Write(filepath.Join(dir, "missing", "a.json"), []byte("x"), 0o644)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorContains(t, err, filepath.Join(dir, "missing", "a.json"))
	require.NotErrorIs(t, err, ErrDirSync)
}

func TestSyncDir(t *testing.T) {
	require.NoError(t, SyncDir(t.TempDir()))
	missing := filepath.Join(t.TempDir(), "gone")
	err := SyncDir(missing)
	require.ErrorIs(t, err, ErrDirSync)
	require.ErrorContains(t, err, missing)
}

func TestWithoutDirSync(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a")
	require.NoError(t, Write(path, []byte("x"), 0o644, WithoutDirSync()))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "x", string(data))
}

func TestParseTemp(t *testing.T) {
	for name, tc := range map[string]struct {
		in, target, tag string
		ok              bool
	}{
		"temp file":       {".a.json.tmp-123", "a.json", "", true},
		"tagged":          {".a.json.tmp-k1f2e-123", "a.json", "k1f2e", true},
		"target has dots": {".x.dev-gpu_0000:00:02.0.json.tmp-9", "x.dev-gpu_0000:00:02.0.json", "", true},
		"no dot":          {"a.json.tmp-1", "", "", false},
		"no marker":       {".a.json", "", "", false},
		"empty target":    {"..tmp-1", "", "", false},
		"plain":           {"a.json", "", "", false},
	} {
		t.Run(name, func(t *testing.T) {
			target, tag, ok := ParseTemp(tc.in)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.target, target)
			require.Equal(t, tc.tag, tag)
		})
	}
	// What CreateTemp makes from the pattern is recognized, with and
	// without a tag.
	for _, tag := range []string{"", "k0a1b2c3d"} {
		f, err := os.CreateTemp(t.TempDir(), TempPattern("b.yaml", tag))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		target, gotTag, ok := ParseTemp(filepath.Base(f.Name()))
		require.True(t, ok)
		require.Equal(t, "b.yaml", target)
		require.Equal(t, tag, gotTag)
	}
}

func TestWriteTempTag(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.json")
	var seen string
	require.NoError(t, Write(path, []byte("x"), 0o644, WithTempTag("k42"), WithCheck(func(tmp string) error {
		seen = filepath.Base(tmp)
		return nil
	})))
	_, tag, ok := ParseTemp(seen)
	require.True(t, ok)
	require.Equal(t, "k42", tag)
}
