// Package dmemtest builds fake cgroup roots for tests of the dmem
// decisions (package dmem): these machines have no dmem, and a test
// names the files a kernel would show.
package dmemtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Root writes files (path relative to the root → content) under a new
// temporary directory and returns it.
func Root(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
	return root
}
