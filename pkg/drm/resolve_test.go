package drm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
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

// agreesWithEvalSymlinks resolves path with r and requires the answer of
// filepath.EvalSymlinks: the same path, or an error for both (the
// resolver may also stop at its 40 links, where Go allows 255).
func agreesWithEvalSymlinks(t *testing.T, r *resolver, path string) {
	t.Helper()
	got, err := r.resolve(path)
	ref, refErr := filepath.EvalSymlinks(path)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return
		}
		require.Error(t, refErr, "%s: resolver failed with %v, EvalSymlinks gave %q", path, err, ref)
		return
	}
	require.NoError(t, refErr, "%s: resolver gave %q", path, got)
	require.Equal(t, ref, got, path)
}

// resolvers are the two kinds of resolver: by paths, and relative to
// the descriptors of the directories it uses most.
var resolvers = map[string]func() *resolver{
	"paths":       newResolver,
	"descriptors": newResolverAt,
	"one descriptor": func() *resolver {
		r := newResolverAt()
		r.maxFDs = 1
		return r
	},
}

// testResolver is a new resolver of kind, closed when t ends.
func testResolver(t *testing.T, kind string) *resolver {
	r := resolvers[kind]()
	t.Cleanup(r.close)
	return r
}

// TestResolverCacheOrder resolves paths through one resolver in every
// order of pairs: what one resolution leaves in the cache (a prefix
// known to be symlink-free, an entry not yet known to be a directory, a
// link sharing its target's entry) must not change the next answer.
func TestResolverCacheOrder(t *testing.T) {
	dir := linkTree(t, nil)
	for name, target := range map[string]string{
		"l":  "a/b",                             // a link to a directory
		"m":  "f",                               // a link to a file
		"up": "a/b/../..",                       // back to dir, through ".."
		"d":  "../" + filepath.Base(dir) + "/a", // leaves dir and comes back
		"x":  "nowhere",
	} {
		require.NoError(t, os.Symlink(target, filepath.Join(dir, name)))
	}
	paths := []string{
		"f", "f/", "f/.", "f/..", "f/x", "m", "m/", "m/.", "m/..",
		"a", "a/", "a/.", "a/..", "a/b/..", "l", "l/", "l/..", "l/../b",
		"up/a/b", "up/f/", "d/b", "d/../a/b", "a/b/c", "x", "x/", "/", "/..",
	}
	for kind := range resolvers {
		for _, p := range paths {
			for _, q := range paths {
				r := testResolver(t, kind)
				for _, path := range []string{p, q, p} {
					if !strings.HasPrefix(path, "/") {
						path = dir + "/" + path
					}
					agreesWithEvalSymlinks(t, r, path)
				}
				require.LessOrEqual(t, len(r.fds), max(r.maxFDs, 0))
				r.close()
			}
		}
	}
}

// TestResolverKnown checks an entry the caller has looked at itself.
func TestResolverKnown(t *testing.T) {
	dir := linkTree(t, map[string]string{"l": "f"})
	r := testResolver(t, "paths")
	r.known(dir+"/f", false)
	_, err := r.resolve(dir + "/f/")
	require.ErrorIs(t, err, syscall.ENOTDIR)
	got, err := r.resolve(dir + "/l")
	require.NoError(t, err)
	require.Equal(t, dir+"/f", got)
	r.known(dir+"/a", true)
	got, err = r.resolve(dir + "/a/./b/..")
	require.NoError(t, err)
	require.Equal(t, dir+"/a", got)
}

func TestJoinTarget(t *testing.T) {
	tests := map[string]struct{ dir, target, want string }{
		"name":              {"/a/b", "c", "/a/b/c"},
		"leading dotdots":   {"/a/b/c", "../../d/e", "/a/d/e"},
		"only dotdots":      {"/a/b", "../..", "/"},
		"above the root":    {"/a", "../../../b", "/b"},
		"later dotdot kept": {"/a/b", "../c/../d", "/a/c/../d"},
		"dot kept":          {"/a", "./c", "/a/./c"},
		"dotdot name":       {"/a", "...", "/a/..."},
		"from the root":     {"/", "../a", "/a"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, joinTarget(tc.dir, tc.target))
		})
	}
}

// FuzzResolverCached is FuzzResolver with one resolver for three
// queries and the first again, so that each answer may come from what
// the ones before it left in the cache.
func FuzzResolverCached(f *testing.F) {
	f.Add("a/b", "..", "l/../m", "n/b", "l/..", "m/")
	f.Add("f", "l/", "../a", "m/.", "l/x", "n")
	f.Add("a/b/../..", "l/f", "m/a/b", "n/a/b/..", "f/..", "l/a")
	f.Fuzz(func(t *testing.T, l, m, n, q1, q2, q3 string) {
		dir := fuzzLinkTree(t, l, m, n, q1, q2, q3)
		for kind := range resolvers {
			r := testResolver(t, kind)
			for _, q := range []string{q1, q2, q3, q1} {
				agreesWithEvalSymlinks(t, r, dir+"/"+q)
			}
			r.close()
		}
	})
}

func TestReadAttr(t *testing.T) {
	for kind := range resolvers {
		t.Run(kind, func(t *testing.T) { testReadAttr(t, kind) })
	}
}

func testReadAttr(t *testing.T, kind string) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	r := testResolver(t, kind)
	// Resolved, and used often enough to be opened by a resolver with
	// descriptors.
	for range fdAfter {
		_, err := r.resolve(dir + "/x")
		require.Error(t, err)
	}
	require.Equal(t, kind != "paths", r.cache[dir].hasFD)
	readAttr := r.readAttr
	write := func(name string, size int) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("x", size)), 0o444))
		return p
	}
	for name, size := range map[string]int{"empty": 0, "small": 7, "one page": maxAttrSize, "over a page": maxAttrSize + 100} {
		t.Run(name, func(t *testing.T) {
			got, err := readAttr(write(name, size))
			require.NoError(t, err)
			require.Equal(t, strings.Repeat("x", min(size, maxAttrSize)), got)
		})
	}
	t.Run("size unknown to stat", func(t *testing.T) {
		// procfs, like sysfs, reports no true size: read to the end.
		want, err := os.ReadFile("/proc/self/cmdline")
		if errors.Is(err, os.ErrNotExist) {
			t.Skip("no /proc")
		}
		require.NoError(t, err)
		got, err := readAttr("/proc/self/cmdline")
		require.NoError(t, err)
		require.Equal(t, string(want[:min(len(want), maxAttrSize)]), got)
	})
	t.Run("missing", func(t *testing.T) {
		_, err := readAttr(filepath.Join(dir, "missing"))
		require.ErrorIs(t, err, os.ErrNotExist)
		require.ErrorContains(t, err, "open "+filepath.Join(dir, "missing"))
	})
	t.Run("symlink", func(t *testing.T) {
		// An attribute is never a link; one in its place is not followed.
		outside := filepath.Join(t.TempDir(), "secret")
		require.NoError(t, os.WriteFile(outside, []byte("outside the root"), 0o444))
		link := filepath.Join(dir, "vendor")
		require.NoError(t, os.Symlink(outside, link))
		got, err := readAttr(link)
		require.ErrorIs(t, err, unix.ELOOP)
		require.ErrorContains(t, err, "open "+link+": a symlink, not followed")
		require.Empty(t, got)
	})
	t.Run("not regular", func(t *testing.T) {
		fifo := filepath.Join(dir, "fifo")
		require.NoError(t, unix.Mkfifo(fifo, 0o644))
		for path, typ := range map[string]string{dir: "d---------", fifo: "p---------", "/dev/null": "Dc---------"} {
			_, err := readAttr(path)
			require.EqualError(t, err, "read "+path+": not a regular file ("+typ+")")
		}
	})
}

// TestResolverDescriptorPinsDirectory checks that a resolver with
// descriptors asks in the directory it resolved, even when its path
// names another one by now (a symlink put in its place).
func TestResolverDescriptorPinsDirectory(t *testing.T) {
	dir := linkTree(t, nil)
	a := dir + "/a"
	r := testResolver(t, "descriptors")
	_, err := r.resolve(a + "/b")
	require.NoError(t, err)
	for _, name := range []string{"x", "y"} {
		_, err := r.resolve(a + "/" + name)
		require.ErrorIs(t, err, os.ErrNotExist)
	}
	require.True(t, r.cache[a].hasFD, "a was used %d times", r.cache[a].uses)

	require.NoError(t, os.Rename(a, dir+"/moved"))
	require.NoError(t, os.MkdirAll(dir+"/other", 0o755))
	require.NoError(t, os.Symlink("other", a))
	require.NoError(t, os.WriteFile(dir+"/moved/attr", []byte("found\n"), 0o444))
	require.NoError(t, os.WriteFile(dir+"/other/attr", []byte("other\n"), 0o444))
	got, err := r.readAttr(a + "/attr")
	require.NoError(t, err)
	require.Equal(t, "found\n", got)
	target, err := r.readlink(a + "/attr")
	require.ErrorIs(t, err, unix.EINVAL, "attr is no link: %q", target)

	r.close()
	require.Empty(t, r.cache, "no entry outlives its descriptor")
	got, err = r.readAttr(a + "/attr")
	require.NoError(t, err)
	require.Equal(t, "other\n", got, "without descriptors the path is asked")
}

func TestUnderSys(t *testing.T) {
	tests := map[string]struct{ sys, sysReal, p, want string }{
		"the root":         {"/host/sys", "/real/sys", "/real/sys", "/host/sys"},
		"below the root":   {"/host/sys", "/real/sys", "/real/sys/devices/x", "/host/sys/devices/x"},
		"root is /":        {"/sys", "/", "/devices/x", "/sys/devices/x"},
		"root as given /":  {"/", "/", "/devices/x", "/devices/x"},
		"same as resolved": {"/sys", "/sys", "/sys/devices/pci0000:00", "/sys/devices/pci0000:00"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := &discovery{sys: tc.sys, sysReal: tc.sysReal}
			require.Equal(t, tc.want, d.underSys(tc.p))
		})
	}
}
