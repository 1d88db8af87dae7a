package watch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// dirMask is what DirWatcher asks inotify for on a watched directory.
const dirMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// eventBuffer is how many events wait for a slow consumer before new
// ones are dropped (consumers rescan, so one pending event is enough).
const eventBuffer = 64

// Event is one change in a watched directory.
type Event struct {
	// Path is the entry that changed (dir/name), or the directory itself.
	Path string
	// Mask holds the inotify flags (unix.IN_CREATE, ...). Zero means the
	// set of watched directories changed, or the queue overflowed.
	Mask uint32
}

// Created reports whether the entry was created or moved in.
func (e Event) Created() bool { return e.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 }

// Removed reports whether the entry was deleted or moved away.
func (e Event) Removed() bool {
	return e.Mask&(unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0
}

// DirWatcher reports changes inside a set of directories.
type DirWatcher struct {
	feed[Event]
	log  *logrus.Entry
	fd   int
	dirs []string

	mu      sync.Mutex
	watches map[int32]string // wd -> watched path
	byPath  map[string]int32
}

// NewDirWatcher starts watching dirs. Missing directories are awaited as
// described in the package doc.
func NewDirWatcher(log *logrus.Entry, dirs ...string) (*DirWatcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify init: %w", err)
	}
	w := &DirWatcher{
		feed:    feed[Event]{file: os.NewFile(uintptr(fd), "inotify"), events: make(chan Event, eventBuffer), done: make(chan struct{})},
		log:     log,
		fd:      fd,
		watches: map[int32]string{},
		byPath:  map[string]int32{},
	}
	for _, d := range dirs {
		w.dirs = append(w.dirs, filepath.Clean(d))
	}
	if _, err := w.refresh(); err != nil {
		w.file.Close()
		return nil, err
	}
	go w.read()
	return w, nil
}

// Events delivers changes until Close; the channel is closed then.
func (w *DirWatcher) Events() <-chan Event { return w.events }

// Close stops watching and waits for the reader to end.
func (w *DirWatcher) Close() error { return w.close() }

// Watched returns the paths watched now, sorted: each target directory
// that exists, else its nearest existing parent.
func (w *DirWatcher) Watched() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(maps.Keys(w.byPath))
}

// wanted returns the path to watch for dir: itself if it is a directory,
// else its nearest existing ancestor.
func wanted(dir string) string {
	for p := dir; ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p
		}
		if p == filepath.Dir(p) {
			return p
		}
	}
}

// maxRefreshRounds bounds refresh's loop: each round can only move a
// watch deeper towards a target, so the depth of the paths bounds it.
const maxRefreshRounds = 32

// refresh makes the watch set match what exists now and reports whether
// it changed. A directory created between the Stat that chose a parent
// and the watch on that parent sends that parent no event, so after
// adding watches it looks again, until the wanted set stays the same.
// Anything created later is reported by a watch that already exists.
func (w *DirWatcher) refresh() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	changed := false
	var errs []error
	for round := 0; round < maxRefreshRounds; round++ {
		want := w.wantedSet()
		errs = errs[:0]
		for p := range want {
			wd, err := unix.InotifyAddWatch(w.fd, p, dirMask)
			if err != nil {
				// It may have vanished since the Stat; the next event or
				// resync tries again.
				errs = append(errs, fmt.Errorf("inotify watch %s: %w", p, err))
				continue
			}
			if old, ok := w.byPath[p]; !ok || old != int32(wd) {
				changed = true
			}
			w.watches[int32(wd)] = p
			w.byPath[p] = int32(wd)
		}
		for p, wd := range w.byPath {
			if !want[p] {
				_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
				delete(w.byPath, p)
				delete(w.watches, wd)
				changed = true
			}
		}
		if maps.Equal(want, w.wantedSet()) {
			break
		}
	}
	if len(errs) > 0 && len(w.byPath) == 0 {
		return changed, errors.Join(errs...)
	}
	for _, e := range errs {
		w.log.WithError(e).Debug("watch not added")
	}
	return changed, nil
}

// wantedSet is the set of paths to watch now, one per target.
func (w *DirWatcher) wantedSet() map[string]bool {
	want := map[string]bool{}
	for _, d := range w.dirs {
		want[wanted(d)] = true
	}
	return want
}

// isTarget reports whether p is one of the directories asked for (as
// opposed to a parent watched while waiting for one).
func (w *DirWatcher) isTarget(p string) bool { return slices.Contains(w.dirs, p) }

func (w *DirWatcher) read() {
	defer close(w.done)
	defer close(w.events)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			if !w.closed.Load() {
				w.log.WithError(err).Warn("inotify read failed")
			}
			return
		}
		evs, err := ParseInotify(buf[:n])
		if err != nil {
			w.log.WithError(err).Warn("malformed inotify events")
		}
		w.handle(evs)
	}
}

func (w *DirWatcher) handle(evs []RawInotify) {
	resync := false
	for _, ev := range evs {
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			w.send(Event{})
			resync = true
			continue
		}
		w.mu.Lock()
		dir, ok := w.watches[ev.Wd]
		if ev.Mask&unix.IN_IGNORED != 0 && ok {
			delete(w.watches, ev.Wd)
			if w.byPath[dir] == ev.Wd {
				delete(w.byPath, dir)
			}
		}
		w.mu.Unlock()
		if !ok {
			continue
		}
		if ev.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED|unix.IN_DELETE|unix.IN_MOVED_FROM) != 0 {
			resync = true
		}
		if !w.isTarget(dir) || ev.Mask&unix.IN_IGNORED != 0 {
			continue
		}
		p := dir
		if ev.Name != "" {
			p = filepath.Join(dir, ev.Name)
		}
		w.send(Event{Path: p, Mask: ev.Mask})
	}
	if resync {
		changed, err := w.refresh()
		if err != nil {
			w.log.WithError(err).Warn("cannot watch any directory")
		}
		if changed {
			w.send(Event{})
		}
	}
}

// RawInotify is one inotify event as the kernel reports it.
type RawInotify struct {
	Wd     int32
	Mask   uint32
	Cookie uint32
	Name   string
}

// ErrShortInotify reports a truncated inotify event.
var ErrShortInotify = errors.New("truncated inotify event")

// ParseInotify decodes the events in one read from an inotify fd. On a
// truncated event it returns the events before it and ErrShortInotify.
func ParseInotify(b []byte) ([]RawInotify, error) {
	var out []RawInotify
	for len(b) > 0 {
		if len(b) < unix.SizeofInotifyEvent {
			return out, fmt.Errorf("%w: %d header bytes", ErrShortInotify, len(b))
		}
		ev := RawInotify{
			Wd:     int32(binary.NativeEndian.Uint32(b[0:4])),
			Mask:   binary.NativeEndian.Uint32(b[4:8]),
			Cookie: binary.NativeEndian.Uint32(b[8:12]),
		}
		nameLen := binary.NativeEndian.Uint32(b[12:16])
		b = b[unix.SizeofInotifyEvent:]
		if uint64(nameLen) > uint64(len(b)) {
			return out, fmt.Errorf("%w: name of %d bytes, %d left", ErrShortInotify, nameLen, len(b))
		}
		name := b[:nameLen]
		if i := slices.Index(name, 0); i >= 0 {
			name = name[:i]
		}
		ev.Name = string(name)
		b = b[nameLen:]
		out = append(out, ev)
	}
	return out, nil
}
