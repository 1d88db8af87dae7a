package cdi

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/dri-cdi/dri-cdi/cdi/cditest"
	"github.com/dri-cdi/dri-cdi/pkg/atomicfile"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// memTempDir returns a temporary directory on /dev/shm when there is one,
// like the agent's usual /var/run/cdi tmpfs: fsync there costs nothing,
// so tests that sync hundreds of times stay quick on slow disks.
func memTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "dc")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func newTestWriter(t *testing.T, dir string) *Writer {
	t.Helper()
	w, err := NewWriter(dir, DefaultKind)
	require.NoError(t, err)
	return w
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Sys().(*syscall.Stat_t).Ino
}

func TestWriterSync(t *testing.T) {
	a, b, c := i915("0000:00:02.0", 0, 128), amdgpu("0000:03:00.0", 1, 129), platformCard("vkms", "vkms", 2, -1)
	type step struct {
		cards   []drm.Card
		changed bool
		files   []string
	}
	cases := map[string][]step{
		"create then unchanged": {
			{cards: []drm.Card{a}, changed: true, files: []string{"dri-cdi.dev-gpu_0000-00-02.0.yaml", "dri-cdi.dev-gpu_all.yaml"}},
			{cards: []drm.Card{a}, changed: false, files: []string{"dri-cdi.dev-gpu_0000-00-02.0.yaml", "dri-cdi.dev-gpu_all.yaml"}},
		},
		"card added and removed": {
			{cards: []drm.Card{a}, changed: true, files: []string{"dri-cdi.dev-gpu_0000-00-02.0.yaml", "dri-cdi.dev-gpu_all.yaml"}},
			{cards: []drm.Card{a, b, c}, changed: true, files: []string{
				"dri-cdi.dev-gpu_0000-00-02.0.yaml", "dri-cdi.dev-gpu_0000-03-00.0.yaml", "dri-cdi.dev-gpu_all.yaml", "dri-cdi.dev-gpu_vkms.yaml",
			}},
			{cards: []drm.Card{c, b}, changed: true, files: []string{"dri-cdi.dev-gpu_0000-03-00.0.yaml", "dri-cdi.dev-gpu_all.yaml", "dri-cdi.dev-gpu_vkms.yaml"}},
			{cards: []drm.Card{b, c}, changed: false, files: []string{"dri-cdi.dev-gpu_0000-03-00.0.yaml", "dri-cdi.dev-gpu_all.yaml", "dri-cdi.dev-gpu_vkms.yaml"}},
		},
		"last card gone removes everything": {
			{cards: []drm.Card{a, b}, changed: true, files: []string{"dri-cdi.dev-gpu_0000-00-02.0.yaml", "dri-cdi.dev-gpu_0000-03-00.0.yaml", "dri-cdi.dev-gpu_all.yaml"}},
			{cards: nil, changed: true, files: nil},
			{cards: nil, changed: false, files: nil},
		},
		"nothing to do on empty dir": {
			{cards: nil, changed: false, files: nil},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run", "cdi") // missing: Sync creates it
			w := newTestWriter(t, dir)
			for i, s := range steps {
				changed, err := w.Sync(s.cards)
				require.NoError(t, err, "step %d", i)
				require.Equal(t, s.changed, changed, "step %d", i)
				got := cditest.DirFiles(t, dir)
				names := make([]string, 0, len(got))
				for n := range got {
					names = append(names, n)
				}
				sort.Strings(names)
				require.Equal(t, s.files, nilIfEmpty(names), "step %d", i)
				want, err := Generate(DefaultKind, s.cards)
				require.NoError(t, err)
				for _, f := range want {
					require.Equal(t, string(f.Data), got[f.Name], "step %d file %s", i, f.Name)
					st, err := os.Stat(filepath.Join(dir, f.Name))
					require.NoError(t, err)
					require.Equal(t, FileMode, st.Mode().Perm(), "step %d file %s", i, f.Name)
				}
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestWriterLeavesUnchangedFilesAlone(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir)
	a, b := i915("0000:00:02.0", 0, 128), i915("0000:00:03.0", 1, 129)
	_, err := w.Sync([]drm.Card{a})
	require.NoError(t, err)
	cardFile := filepath.Join(dir, "dri-cdi.dev-gpu_0000-00-02.0.yaml")
	allFile := filepath.Join(dir, "dri-cdi.dev-gpu_all.yaml")
	cardIno, allIno := inode(t, cardFile), inode(t, allFile)

	changed, err := w.Sync([]drm.Card{a, b})
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, cardIno, inode(t, cardFile), "unchanged card spec was rewritten")
	require.NotEqual(t, allIno, inode(t, allFile), "all spec must be replaced by rename")
}

func TestWriterRepairsModeAndContent(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir)
	a := i915("0000:00:02.0", 0, 128)
	_, err := w.Sync([]drm.Card{a})
	require.NoError(t, err)
	cardFile := filepath.Join(dir, "dri-cdi.dev-gpu_0000-00-02.0.yaml")
	allFile := filepath.Join(dir, "dri-cdi.dev-gpu_all.yaml")
	want := cditest.DirFiles(t, dir)

	require.NoError(t, os.Chmod(cardFile, 0o600))
	require.NoError(t, os.WriteFile(allFile, []byte("garbage"), 0o644))
	changed, err := w.Sync([]drm.Card{a})
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, want, cditest.DirFiles(t, dir))
	st, err := os.Stat(cardFile)
	require.NoError(t, err)
	require.Equal(t, FileMode, st.Mode().Perm())
}

func TestWriterNeverTouchesForeignFiles(t *testing.T) {
	dir := t.TempDir()
	foreign := map[string]string{
		"vendor.com-gpu.yaml":          "cdiVersion: 0.5.0\nkind: vendor.com/gpu\ndevices: []\n",
		"dri-cdi.dev-gpu_x.json":       "{}",         // our prefix, not our extension
		"dri-cdi.dev-gpu_notes.txt":    "hello",      // not a spec
		"other.yaml":                   "not a spec", // someone else's broken file
		".dri-cdi.dev-gpuX.yaml.tmp-1": "not ours",   // hidden, different prefix
		"dri-cdi.dev-gpu_x_all.yaml":   specOfKind(t, "dri-cdi.dev/gpu_x", "all"),
		"dri-cdi.dev-gpu_x_vkms.yaml":  specOfKind(t, "dri-cdi.dev/gpu_x", "vkms"),
	}
	for n, c := range foreign {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte(c), 0o600))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "dri-cdi.dev-gpu_sub.yaml.d"), 0o755))
	w := newTestWriter(t, dir)
	_, err := w.Sync([]drm.Card{i915("0000:00:02.0", 0, 128)})
	require.NoError(t, err)
	_, err = w.Sync(nil)
	require.NoError(t, err)
	got := cditest.DirFiles(t, dir)
	require.Equal(t, foreign, got)
	st, err := os.Stat(filepath.Join(dir, "vendor.com-gpu.yaml"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), st.Mode().Perm())
	require.DirExists(t, filepath.Join(dir, "dri-cdi.dev-gpu_sub.yaml.d"))
}

// writeOld writes a file whose modification time is two minutes ago:
// older than a write in flight.
func writeOld(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	old := time.Now().Add(-2 * time.Minute)
	require.NoError(t, os.Chtimes(path, old, old))
}

// specOfKind returns a valid spec file of another kind.
func specOfKind(t *testing.T, kind, device string) string {
	t.Helper()
	files, err := Generate(kind, []drm.Card{platformCard("vkms", "vkms", 0, 128)})
	require.NoError(t, err)
	for _, f := range files {
		if f.Device == device {
			return string(f.Data)
		}
	}
	t.Fatalf("no device %s", device)
	return ""
}

func TestWriterRemovesStaleOwnedFiles(t *testing.T) {
	dir := t.TempDir()
	stale := map[string]string{
		"dri-cdi.dev-gpu_0000-09-00.0.yaml":            specOfKind(t, DefaultKind, "vkms"),
		"dri-cdi.dev-gpu_broken.yaml":                  "{{{ not yaml",
		".dri-cdi.dev-gpu_all.yaml.tmp-123456":         "half a fi",
		".dri-cdi.dev-gpu_0000-00-02.0.yaml.tmp-98765": "",
	}
	for n, c := range stale {
		writeOld(t, filepath.Join(dir, n), c)
	}
	w := newTestWriter(t, dir)
	changed, err := w.Sync([]drm.Card{i915("0000:00:02.0", 0, 128)})
	require.NoError(t, err)
	require.True(t, changed)
	got := cditest.DirFiles(t, dir)
	require.Len(t, got, 2)
	require.Contains(t, got, "dri-cdi.dev-gpu_0000-00-02.0.yaml")
	require.Contains(t, got, "dri-cdi.dev-gpu_all.yaml")
}

// Another kind's Writer whose prefix starts with ours (dri-cdi.dev/gpu_x
// next to dri-cdi.dev/gpu) may have a temporary file in flight: removing
// it would make its rename fail. Our own temporary files left by a crash
// go, tagged ones whatever their target, untagged ones of an earlier
// version when we write their target.
func TestWriterLeavesAnotherKindsTempFiles(t *testing.T) {
	dir := t.TempDir()
	other := map[string]string{
		".dri-cdi.dev-gpu_x_vkms.yaml.tmp-" + tempTag("dri-cdi.dev/gpu_x") + "-123": "in flight",
		".dri-cdi.dev-gpu_x_all.yaml.tmp-4567":                                      "in flight, untagged",
	}
	ours := map[string]string{
		".dri-cdi.dev-gpu_0000-09-00.0.yaml.tmp-" + tempTag(DefaultKind) + "-1": "crash left it",
		".dri-cdi.dev-gpu_all.yaml.tmp-77":                                      "an earlier version left it",
	}
	for _, files := range []map[string]string{other, ours} {
		for n, c := range files {
			writeOld(t, filepath.Join(dir, n), c)
		}
	}
	// Our own kind's file in flight (the other instance of a rolling
	// update writes the same kind): too young to be a crash's leftover.
	inFlight := ".dri-cdi.dev-gpu_0000-00-02.0.yaml.tmp-" + tempTag(DefaultKind) + "-7"
	require.NoError(t, os.WriteFile(filepath.Join(dir, inFlight), []byte("in flight"), 0o644))
	other[inFlight] = "in flight"
	w := newTestWriter(t, dir)
	_, err := w.Sync([]drm.Card{i915("0000:00:02.0", 0, 128)})
	require.NoError(t, err)
	got := cditest.DirFiles(t, dir)
	for n := range other {
		require.Contains(t, got, n, "another kind's temporary file must stay")
	}
	for n := range ours {
		require.NotContains(t, got, n, "our own leftover must go")
	}
	require.Len(t, got, len(other)+2)
}

// A spec that cannot be updated (a full or read-only directory) is
// removed where removal still works: its old content names the device
// numbers the card had, which may be another card's by now. The error
// names the stale device.
func TestWriterRemovesASpecItCannotUpdate(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir)
	a, b := i915("0000:00:02.0", 0, 128), i915("0000:00:03.0", 1, 129)
	_, err := w.Sync([]drm.Card{a, b})
	require.NoError(t, err)
	full := errors.New("no space left on device")
	w.writeFile = func(path string, data []byte, perm fs.FileMode, opts ...atomicfile.Option) error {
		if strings.Contains(path, "0000-00-02.0") {
			return full
		}
		return atomicfile.Write(path, data, perm, opts...)
	}
	// a unbound: its spec must lose its nodes (Unavailable).
	changed, err := w.Sync([]drm.Card{Unavailable(a), b})
	require.ErrorIs(t, err, full)
	require.True(t, changed)
	var se *SyncError
	require.ErrorAs(t, err, &se)
	require.Equal(t, []string{"0000:00:02.0"}, se.Stale)
	got := cditest.DirFiles(t, dir)
	require.NotContains(t, got, "dri-cdi.dev-gpu_0000-00-02.0.yaml", "the stale spec must go")
	require.Contains(t, got, "dri-cdi.dev-gpu_0000-00-03.0.yaml")

	// Another writer of the same kind (a rolling update's other instance)
	// wrote the right content while this write failed: the file stays.
	w.writeFile = func(path string, data []byte, perm fs.FileMode, opts ...atomicfile.Option) error {
		if strings.Contains(path, "0000-00-02.0") {
			require.NoError(t, os.WriteFile(path, data, perm))
			return full
		}
		return atomicfile.Write(path, data, perm, opts...)
	}
	_, err = w.Sync([]drm.Card{a, b})
	require.ErrorIs(t, err, full)
	require.Contains(t, cditest.DirFiles(t, dir), "dri-cdi.dev-gpu_0000-00-02.0.yaml", "a file that holds the right content stays")

	// Space returns: the spec is written again.
	w.writeFile = atomicfile.Write
	_, err = w.Sync([]drm.Card{Unavailable(a), b})
	require.NoError(t, err)
	require.Contains(t, cditest.DirFiles(t, dir), "dri-cdi.dev-gpu_0000-00-02.0.yaml")
}

func TestWriterErrors(t *testing.T) {
	cases := map[string]struct {
		setup func(t *testing.T, dir string) *Writer
		cards []drm.Card
		want  []string
	}{
		"invalid card touches nothing": {
			setup: func(t *testing.T, dir string) *Writer {
				w := newTestWriter(t, dir)
				_, err := w.Sync([]drm.Card{i915("0000:00:02.0", 0, 128)})
				require.NoError(t, err)
				return w
			},
			cards: []drm.Card{i915("0000:00:02.0", 0, 128), platformCard("all", "vkms", 1, 129)},
			want:  []string{"generate CDI specs for", `invalid card "all"`},
		},
		"target is a directory": {
			setup: func(t *testing.T, dir string) *Writer {
				require.NoError(t, os.MkdirAll(filepath.Join(dir, "dri-cdi.dev-gpu_all.yaml", "x"), 0o755))
				return newTestWriter(t, dir)
			},
			cards: []drm.Card{i915("0000:00:02.0", 0, 128)},
			want:  []string{"CDI spec: write ", "dri-cdi.dev-gpu_all.yaml: "},
		},
		"dir is a file": {
			setup: func(t *testing.T, dir string) *Writer {
				p := filepath.Join(dir, "cdi")
				require.NoError(t, os.WriteFile(p, nil, 0o644))
				w, err := NewWriter(p, DefaultKind)
				require.NoError(t, err)
				return w
			},
			cards: []drm.Card{i915("0000:00:02.0", 0, 128)},
			want:  []string{"create CDI spec dir: mkdir ", "/cdi: not a directory"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			w := tc.setup(t, dir)
			before := cditest.DirFiles(t, dir)
			_, err := w.Sync(tc.cards)
			require.Error(t, err)
			for _, s := range tc.want {
				require.Contains(t, err.Error(), s)
			}
			if name == "invalid card touches nothing" {
				require.Equal(t, before, cditest.DirFiles(t, dir))
			}
		})
	}
}

func TestWriterPartialFailureStillWritesOthers(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "dri-cdi.dev-gpu_all.yaml", "x"), 0o755))
	w := newTestWriter(t, dir)
	changed, err := w.Sync([]drm.Card{i915("0000:00:02.0", 0, 128)})
	require.Error(t, err)
	require.True(t, changed)
	require.FileExists(t, filepath.Join(dir, "dri-cdi.dev-gpu_0000-00-02.0.yaml"))
	// No temporary file is left behind.
	for n := range cditest.DirFiles(t, dir) {
		require.NotContains(t, n, atomicfile.TempMarker)
	}
}

func TestNewWriterErrors(t *testing.T) {
	_, err := NewWriter("", DefaultKind)
	require.ErrorContains(t, err, "CDI spec dir is empty")
	_, err = NewWriter(t.TempDir(), "nokind")
	require.ErrorIs(t, err, ErrInvalidKind)
}

func allData(t *testing.T, cards []drm.Card) []byte {
	t.Helper()
	files, err := Generate(DefaultKind, cards)
	require.NoError(t, err)
	for _, f := range files {
		if f.Device == AllDevice {
			return f.Data
		}
	}
	t.Fatal("no all device")
	return nil
}

// TestWriterConcurrentReader rewrites the specs many times while a reader
// loads them with the CDI library, the way a runtime's cache does. The
// reader must never see a partial or invalid file, nor a moment where the
// "all" file (rewritten by every Sync) is missing.
func TestWriterConcurrentReader(t *testing.T) {
	dir := memTempDir(t)
	w := newTestWriter(t, dir)
	// Two card sets whose files differ in size and content, so a torn
	// write would be visible; switching between them rewrites the "all"
	// file, adds and removes card files, and keeps three card files.
	setA := manyCards(8)
	setB := append(manyCards(3), amdgpu("0000:40:00.0", 20, 140), platformCard("vkms", "vkms", 21, 141))
	_, err := w.Sync(setA)
	require.NoError(t, err)
	allFile := filepath.Join(dir, "dri-cdi.dev-gpu_all.yaml")
	// The only two contents the "all" file may ever have.
	allA, allB := allData(t, setA), allData(t, setB)

	var (
		stop    atomic.Bool
		reads   atomic.Int64
		wg      sync.WaitGroup
		failed  atomic.Bool
		readErr error // written by the reader before it sets failed
	)
	fail := func(err error) {
		readErr = err
		failed.Store(true)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			// Mostly a cheap byte check of the file every Sync replaces,
			// so reads are frequent enough to hit a non-atomic write.
			if i%16 != 0 {
				data, err := os.ReadFile(allFile)
				if err != nil {
					fail(err)
					return
				}
				if !bytes.Equal(data, allA) && !bytes.Equal(data, allB) {
					fail(fmt.Errorf("read a torn %s (%d bytes):\n%s", allFile, len(data), data))
					return
				}
				reads.Add(1)
				continue
			}
			// Now and then, every file through the CDI library.
			var paths []string
			{
				entries, err := os.ReadDir(dir)
				if err != nil {
					fail(err)
					return
				}
				for _, e := range entries {
					if strings.HasSuffix(e.Name(), FileExt) {
						paths = append(paths, filepath.Join(dir, e.Name()))
					}
				}
			}
			for _, p := range paths {
				_, err := cdilib.ReadSpec(p, 0)
				if errors.Is(err, fs.ErrNotExist) && p != allFile {
					continue // a card file removed between listing and reading
				}
				if err != nil {
					fail(err)
					return
				}
				reads.Add(1)
			}
		}
	}()

	const minSyncs, minReads = 50, 1000
	syncs := 0
	for ; syncs < minSyncs || reads.Load() < minReads; syncs++ {
		if failed.Load() || syncs > 100000 {
			break
		}
		cards := setA
		if syncs%2 == 0 {
			cards = setB
		}
		changed, err := w.Sync(cards)
		require.NoError(t, err)
		require.True(t, changed)
	}
	stop.Store(true)
	wg.Wait()
	require.NoError(t, readErr)
	t.Logf("%d syncs, %d reads", syncs, reads.Load())
	require.GreaterOrEqual(t, reads.Load(), int64(minReads))
}

// TestWriterRewritesOnHostGroupChange: the spec carries the host node's
// gid, so a group change on the host (seen by the next discovery) must
// rewrite the file on the next sync, and an unchanged group must not.
func TestWriterRewritesOnHostGroupChange(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir, DefaultKind)
	require.NoError(t, err)
	card := i915("0000:00:02.0", 1, 128)
	changed, err := w.Sync([]drm.Card{card})
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = w.Sync([]drm.Card{card})
	require.NoError(t, err)
	require.False(t, changed, "same group: nothing to write")

	card.RenderNode.GID = 992
	changed, err = w.Sync([]drm.Card{card})
	require.NoError(t, err)
	require.True(t, changed, "the host's group changed: the spec must follow")
	got, err := LoadDevices(dir, DefaultKind)
	require.NoError(t, err)
	gids := map[string]uint32{}
	for _, n := range got[card.ID] {
		gids[n.Path] = n.GID
	}
	require.Equal(t, uint32(992), gids["/dev/dri/renderD128"])
	require.Equal(t, uint32(44), gids["/dev/dri/card1"])
}
