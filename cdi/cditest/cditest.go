// Package cditest holds helpers for tests of code that writes CDI spec
// directories: the cdi package's Writer and the CLI's cdi generate.
package cditest

import (
	"os"
	"path/filepath"
	"testing"
)

// DirFiles returns name -> content of the regular files directly in dir,
// what a spec directory holds as a runtime would list it.
func DirFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(data)
	}
	return out
}
