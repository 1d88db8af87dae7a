package kubelettest

import (
	"os"
	"testing"
)

// ShortDir returns a fresh directory with a short path, removed when the
// test ends: unix socket paths must stay under 108 bytes, and
// t.TempDir() can be longer.
func ShortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
