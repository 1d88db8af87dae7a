package cditest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDirFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("a"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".tmp"), []byte("t"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.Symlink("a.yaml", filepath.Join(dir, "link.yaml")))
	require.Equal(t, map[string]string{"a.yaml": "a", ".tmp": "t"}, DirFiles(t, dir))
}
