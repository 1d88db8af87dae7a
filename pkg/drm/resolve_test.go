package drm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// linkTree makes dirs a/b, file f and the given symlinks (name -> target)
// in a fresh dir.
func linkTree(t *testing.T, links map[string]string) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), nil, 0o644))
	for name, target := range links {
		require.NoError(t, os.Symlink(target, filepath.Join(dir, name)))
	}
	return dir
}

func TestResolver(t *testing.T) {
	tests := map[string]struct {
		links map[string]string
		path  string // relative to the tree; "@" stands for the tree dir
		want  string // relative to the tree; "" means an error
		loop  bool
	}{
		"plain":                        {path: "a/b", want: "a/b"},
		"dots":                         {path: "a/./b/../b//", want: "a/b"},
		"relative link":                {links: map[string]string{"l": "a/b"}, path: "l", want: "a/b"},
		"absolute link":                {links: map[string]string{"l": "@/a"}, path: "l/b", want: "a/b"},
		"chain":                        {links: map[string]string{"l": "m", "m": "a"}, path: "l/b", want: "a/b"},
		"dotdot after link":            {links: map[string]string{"l": "a/b"}, path: "l/../b", want: "a/b"},
		"dotdot in target":             {links: map[string]string{"l": "a/b/..", "m": "l/../f"}, path: "m", want: "f"},
		"link in a link":               {links: map[string]string{"l": "a", "m": "l/b"}, path: "m", want: "a/b"},
		"link to dot":                  {links: map[string]string{"l": "."}, path: "l/l/l/a", want: "a"},
		"dangling":                     {links: map[string]string{"l": "nowhere"}, path: "l"},
		"missing":                      {path: "a/c"},
		"through a file":               {path: "f/x"},
		"slash after a file":           {path: "f/"},
		"dot after a file":             {path: "f/."},
		"dotdot after a file":          {path: "f/.."},
		"slash after a link to a file": {links: map[string]string{"m": "f"}, path: "m/"},
		"self loop":                    {links: map[string]string{"l": "l"}, path: "l", loop: true},
		"two-link loop":                {links: map[string]string{"l": "m", "m": "l/x"}, path: "l", loop: true},
		"root":                         {path: "/", want: "/"},
		"dotdot above root":            {path: "/../..", want: "/"},
		"repeated cached link":         {links: map[string]string{"l": "a"}, path: "l/b/../../l/b", want: "a/b"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := linkTree(t, nil)
			for k, v := range tc.links {
				require.NoError(t, os.Symlink(strings.ReplaceAll(v, "@", dir), filepath.Join(dir, k)))
			}
			path := tc.path
			if !strings.HasPrefix(path, "/") {
				path = dir + "/" + path
			}
			r := newResolver()
			got, err := r.resolve(path)
			if tc.want == "" {
				require.Error(t, err)
				if tc.loop {
					require.ErrorIs(t, err, syscall.ELOOP)
				} else {
					require.False(t, errors.Is(err, syscall.ELOOP), err)
				}
				return
			}
			require.NoError(t, err)
			want := tc.want
			if !strings.HasPrefix(want, "/") {
				want = filepath.Join(dir, want)
			}
			require.Equal(t, want, got)
			ref, err := filepath.EvalSymlinks(path)
			require.NoError(t, err)
			require.Equal(t, ref, got, "agrees with filepath.EvalSymlinks")
			again, err := r.resolve(path)
			require.NoError(t, err)
			require.Equal(t, got, again, "cached answer")
		})
	}
	_, err := newResolver().resolve("relative/path")
	require.Error(t, err)
}

// FuzzResolver checks the resolver against filepath.EvalSymlinks on
// trees with up to three fuzzed symlinks.
func FuzzResolver(f *testing.F) {
	f.Add("a/b", "..", "l/../m", "n/b")
	f.Add("m", "l", ".", "l/m/n")
	f.Add("../a", "a/b/../../f", "n", "m/x")
	f.Fuzz(func(t *testing.T, l, m, n, query string) {
		dir := fuzzLinkTree(t, l, m, n, query)
		agreesWithEvalSymlinks(t, newResolver(), dir+"/"+query)
	})
}

// fuzzLinkTree is the tree of the resolver fuzz targets: linkTree with
// the fuzzed links l, m and n. It skips inputs no tree of this shape
// can hold, judging the queries too.
func fuzzLinkTree(t *testing.T, l, m, n string, queries ...string) string {
	t.Helper()
	for _, s := range append([]string{l, m, n}, queries...) {
		// Absolute and long paths leave the small tree this checks.
		if len(s) > 64 || strings.HasPrefix(s, "/") {
			t.Skip("outside the tree")
		}
		// No path holds a NUL byte.
		if strings.ContainsRune(s, 0) {
			t.Skip("NUL byte")
		}
	}
	for _, target := range []string{l, m, n} {
		// symlink(2) refuses an empty target (ENOENT), so no tree
		// has such a link to resolve.
		if target == "" {
			t.Skip("empty symlink target")
		}
	}
	return linkTree(t, map[string]string{"l": l, "m": m, "n": n})
}
