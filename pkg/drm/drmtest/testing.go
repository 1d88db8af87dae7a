package drmtest

import "testing"

// SkipUnlessRoot skips t when the process cannot create char device
// nodes, so that discovery tests that need them skip cleanly.
func SkipUnlessRoot(t testing.TB) {
	t.Helper()
	if !CanMknod() {
		t.Skip("needs root to create char device nodes with mknod")
	}
}

// MustBuild builds a fake tree with gpus in a fresh temp dir of t and
// fails t on error.
func MustBuild(t testing.TB, gpus ...GPU) *Tree {
	t.Helper()
	tree, err := NewTree(t.TempDir(), gpus...)
	if err != nil {
		t.Fatalf("build fake DRM tree: %v", err)
	}
	return tree
}
