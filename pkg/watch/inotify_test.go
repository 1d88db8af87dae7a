package watch

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func rawEvent(wd int32, mask uint32, name string, pad int) []byte {
	nameLen := 0
	if name != "" {
		nameLen = len(name) + 1 + pad
	}
	b := make([]byte, unix.SizeofInotifyEvent+nameLen)
	binary.NativeEndian.PutUint32(b[0:], uint32(wd))
	binary.NativeEndian.PutUint32(b[4:], mask)
	binary.NativeEndian.PutUint32(b[12:], uint32(nameLen))
	copy(b[unix.SizeofInotifyEvent:], name)
	return b
}

func TestParseInotify(t *testing.T) {
	two := append(rawEvent(1, unix.IN_CREATE, "card1", 10), rawEvent(2, unix.IN_DELETE_SELF, "", 0)...)
	tests := map[string]struct {
		in      []byte
		want    []RawInotify
		wantErr bool
	}{
		"two events": {in: two, want: []RawInotify{{Wd: 1, Mask: unix.IN_CREATE, Name: "card1"}, {Wd: 2, Mask: unix.IN_DELETE_SELF}}},
		"empty":      {in: nil},
		"short header": {
			in:      two[:10],
			wantErr: true,
		},
		"truncated name keeps earlier events": {
			in:      append(rawEvent(3, unix.IN_ATTRIB, "a", 0), rawEvent(4, unix.IN_CREATE, "renderD128", 5)[:20]...),
			want:    []RawInotify{{Wd: 3, Mask: unix.IN_ATTRIB, Name: "a"}},
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseInotify(tc.in)
			if tc.wantErr {
				require.ErrorIs(t, err, ErrShortInotify)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzParseInotify(f *testing.F) {
	f.Add(rawEvent(1, unix.IN_CREATE, "card1", 3))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, err := ParseInotify(b)
		if err == nil {
			require.LessOrEqual(t, len(evs)*unix.SizeofInotifyEvent, len(b))
		}
	})
}

// waitEvent waits for an event that satisfies ok, draining others.
func waitEvent(t *testing.T, w *DirWatcher, ok func(Event) bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		for {
			select {
			case ev := <-w.Events():
				if ok(ev) {
					return true
				}
			default:
				return false
			}
		}
	}, 5*time.Second, time.Millisecond)
}

func TestDirWatcherFollowsDirectoryLifecycle(t *testing.T) {
	root := t.TempDir()
	dri := filepath.Join(root, "dev", "dri")
	byPath := filepath.Join(dri, "by-path")
	w, err := NewDirWatcher(logrus.NewEntry(logrus.New()), dri, byPath)
	require.NoError(t, err)
	defer w.Close()

	// Neither exists: the nearest existing parent is watched.
	require.Equal(t, []string{root}, w.Watched())

	require.NoError(t, os.MkdirAll(byPath, 0o755))
	require.Eventually(t, func() bool {
		got := w.Watched()
		return len(got) == 2 && got[0] == dri && got[1] == byPath
	}, 5*time.Second, time.Millisecond)
	waitEvent(t, w, func(ev Event) bool { return ev.Mask == 0 })

	require.NoError(t, os.WriteFile(filepath.Join(dri, "card1"), nil, 0o600))
	waitEvent(t, w, func(ev Event) bool { return ev.Path == filepath.Join(dri, "card1") && ev.Created() })

	require.NoError(t, os.Symlink("../card1", filepath.Join(byPath, "pci-0000:00:02.0-card")))
	waitEvent(t, w, func(ev Event) bool { return ev.Path == filepath.Join(byPath, "pci-0000:00:02.0-card") && ev.Created() })

	require.NoError(t, os.Remove(filepath.Join(dri, "card1")))
	waitEvent(t, w, func(ev Event) bool { return ev.Path == filepath.Join(dri, "card1") && ev.Removed() })

	// Wiping the tree falls back to the parent; re-creating it switches back.
	require.NoError(t, os.RemoveAll(dri))
	require.Eventually(t, func() bool {
		got := w.Watched()
		return len(got) == 1 && got[0] == filepath.Join(root, "dev")
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, os.MkdirAll(dri, 0o755))
	require.Eventually(t, func() bool {
		got := w.Watched()
		return len(got) == 1 && got[0] == dri
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, os.WriteFile(filepath.Join(dri, "renderD128"), nil, 0o600))
	waitEvent(t, w, func(ev Event) bool { return ev.Path == filepath.Join(dri, "renderD128") })
}

func TestDirWatcherIgnoresParentNoise(t *testing.T) {
	root := t.TempDir()
	w, err := NewDirWatcher(logrus.NewEntry(logrus.New()), filepath.Join(root, "dri"))
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, os.WriteFile(filepath.Join(root, "tty1"), nil, 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(root, "dri"), 0o755))
	// The first event is the switch to dri; the unrelated file in the
	// parent produced none.
	select {
	case ev := <-w.Events():
		require.Equal(t, Event{}, ev)
	case <-time.After(5 * time.Second):
		t.Fatal("no event for the directory appearing")
	}
}

func TestDirWatcherClose(t *testing.T) {
	w, err := NewDirWatcher(logrus.NewEntry(logrus.New()), t.TempDir())
	require.NoError(t, err)
	require.NoError(t, w.Close())
	_, open := <-w.Events()
	require.False(t, open)
}
