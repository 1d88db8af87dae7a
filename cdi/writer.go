package cdi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/dri-cdi/dri-cdi/pkg/atomicfile"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
)

// FileMode is the mode of every spec file: runtimes and operators read
// them, only the agent writes them.
const FileMode fs.FileMode = 0o644

// Option changes how a Writer works.
type Option func(*Writer)

// WithLogger makes the Writer log each file it writes or removes.
func WithLogger(log *logrus.Entry) Option {
	return func(w *Writer) { w.log = log }
}

// Writer keeps the spec files of one kind in one directory in step with a
// set of cards. It owns exactly the files named "<prefix>*.yaml" (prefix
// from FilePrefix) whose kind is its own, plus its own temporary files;
// everything else in the directory is left alone. A Writer is safe for
// concurrent use; two Writers must not share a directory and kind.
type Writer struct {
	dir    string
	kind   string
	prefix string
	// tag names the Writer's kind in its temporary files (tempTag).
	tag string
	// writeFile is atomicfile.Write (a failing one in tests).
	writeFile func(path string, data []byte, perm fs.FileMode, opts ...atomicfile.Option) error
	log       *logrus.Entry

	mu sync.Mutex
	// last is the previous Generate, reused while the cards stay equal
	// (see generated).
	last *generated
}

// NewWriter returns a Writer for kind in dir. The directory is created by
// the first Sync when it is missing.
func NewWriter(dir, kind string, opts ...Option) (*Writer, error) {
	if dir == "" {
		return nil, errors.New("CDI spec dir is empty")
	}
	prefix, err := FilePrefix(kind)
	if err != nil {
		return nil, err
	}
	w := &Writer{dir: dir, kind: kind, prefix: prefix, tag: tempTag(kind), writeFile: atomicfile.Write}
	for _, o := range opts {
		o(w)
	}
	if w.log == nil {
		w.log = logging.Discard()
	}
	w.log = w.log.WithFields(logrus.Fields{"cdiDir": dir, "cdiKind": kind})
	return w, nil
}

// Dir returns the directory the Writer manages.
func (w *Writer) Dir() string { return w.dir }

// Kind returns the CDI kind the Writer writes.
func (w *Writer) Kind() string { return w.kind }

// Sync makes the directory hold exactly the spec files Generate returns
// for cards: it writes each file whose content or mode differs, removes
// owned files no card needs any more (all of them when cards is empty),
// and reports whether anything on disk changed.
//
// When generation fails (an invalid card) nothing is touched and the
// error is returned. Otherwise every file is attempted, and the error, a
// *SyncError, joins one error per file that could not be written or
// removed, each naming the file and the reason. A file that cannot be
// written is removed (see SyncError.Stale): its old content may name
// device numbers that are another card's by now.
func (w *Writer) Sync(cards []drm.Card) (changed bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()

	files, err := w.generate(cards)
	if err != nil {
		return false, fmt.Errorf("generate CDI specs for %s: %w", w.dir, err)
	}

	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return false, fmt.Errorf("create CDI spec dir: %w", err)
	}

	var errs []error
	var stale []string
	want := make(map[string]bool, len(files))
	for _, f := range files {
		want[f.Name] = true
		wrote, err := w.write(f)
		if err != nil {
			// The old file holds what the device was: after an unbind or
			// a renumbering its numbers may be another card's by now. No
			// spec is safer than a wrong one, and removing a file still
			// works on a full filesystem.
			stale = append(stale, f.Device)
			if removed, rmErr := w.removeStale(f); rmErr != nil {
				err = errors.Join(err, rmErr)
			} else if removed {
				changed = true
				w.log.WithFields(logrus.Fields{"file": f.Name, "device": f.Device}).Warn("removed a CDI spec that could not be updated")
			}
			errs = append(errs, err)
			continue
		}
		if wrote {
			changed = true
			w.log.WithFields(logrus.Fields{"file": f.Name, "device": f.Device}).Info("wrote CDI spec")
		}
	}

	entries, err := os.ReadDir(w.dir)
	if err != nil {
		errs = append(errs, fmt.Errorf("list CDI spec dir %s: %w", w.dir, err))
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case w.ownsTemp(e, want):
			// A temporary file left by a crash between create and rename.
			if err := w.remove(name); err != nil {
				errs = append(errs, err)
			}
		case strings.HasPrefix(name, w.prefix) && strings.HasSuffix(name, FileExt) && !want[name]:
			if !w.owns(name) {
				continue
			}
			if err := w.remove(name); err != nil {
				errs = append(errs, err)
				continue
			}
			changed = true
			w.log.WithField("file", name).Info("removed CDI spec")
		}
	}

	if changed {
		if err := atomicfile.SyncDir(w.dir); err != nil {
			errs = append(errs, fmt.Errorf("CDI spec dir: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return changed, &SyncError{Stale: stale, Err: err}
	}
	return changed, nil
}

// SyncError is the error of a Sync that could not make every file what
// it should be. Stale names the devices whose spec could not be written:
// each one's old file was removed, or, where even that failed (a
// read-only directory), still holds what the device was. A caller must
// not hand out a device named there.
type SyncError struct {
	// Stale are the device names whose spec is missing or out of date.
	Stale []string
	// Err joins the error of every file.
	Err error
}

func (e *SyncError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *SyncError) Unwrap() error { return e.Err }

// removeStale removes the file of f after its update failed, and says
// whether there was one. A file that already holds f's content stays:
// another writer of the same kind and directory (the two instances of a
// rolling update) wrote it meanwhile.
func (w *Writer) removeStale(f File) (bool, error) {
	path := filepath.Join(w.dir, f.Name)
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, f.Data) {
		return false, nil
	}
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("remove CDI spec %s that could not be updated: %w", path, err)
	}
	return true, nil
}

// tempTag is the tag of a Writer's temporary files: a hash of its kind,
// since a file name alone cannot tell kinds apart ("v-c_x_y.yaml" is
// device "x_y" of v/c or device "y" of v/c_x).
func tempTag(kind string) string {
	sum := sha256.Sum256([]byte(kind))
	return "k" + hex.EncodeToString(sum[:4])
}

// tempAge is how old a temporary file must be before the cleanup takes
// it for one a crash left: a file in flight lives for the milliseconds
// of one write, and may be another writer's of the same kind (the two
// instances of a rolling update share the directory and the tag).
const tempAge = time.Minute

// ownsTemp reports whether e is a temporary file this Writer left: one
// with its tag, or, without a tag (written before temporary files were
// tagged), one of a file it is about to write now; in either case older
// than tempAge. A temporary file of another kind's Writer is never
// touched: removing it would make that Writer's rename fail.
func (w *Writer) ownsTemp(e fs.DirEntry, want map[string]bool) bool {
	target, tag, ok := atomicfile.ParseTemp(e.Name())
	if !ok || !strings.HasPrefix(target, w.prefix) || !strings.HasSuffix(target, FileExt) {
		return false
	}
	if tag != w.tag && (tag != "" || !want[target]) {
		return false
	}
	info, err := e.Info()
	return err == nil && time.Since(info.ModTime()) >= tempAge
}

// owns reports whether a file with the Writer's prefix belongs to it. A
// file that parses as a spec of another kind does not: another kind's
// prefix can start with ours ("v-c_" for v/c, "v-c_x_" for v/c_x). A file
// that does not parse at all carries our name, so it is ours to replace.
func (w *Writer) owns(name string) bool {
	data, err := os.ReadFile(filepath.Join(w.dir, name))
	if err != nil {
		return true
	}
	raw, err := cdilib.ParseSpec(data)
	if err != nil || raw == nil {
		return true
	}
	if raw.Kind != w.kind {
		w.log.WithFields(logrus.Fields{"file": name, "kind": raw.Kind}).Debug("leaving spec file of another kind alone")
		return false
	}
	return true
}

// write installs f unless the file already holds exactly f.Data with
// FileMode.
func (w *Writer) write(f File) (bool, error) {
	path := filepath.Join(w.dir, f.Name)
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, f.Data) {
		if st, err := os.Lstat(path); err == nil && st.Mode().IsRegular() && st.Mode().Perm() == FileMode {
			return false, nil
		}
	}

	// The directory is synced once per Sync, after every file.
	err := w.writeFile(path, f.Data, FileMode, atomicfile.WithoutDirSync(), atomicfile.WithTempTag(w.tag), atomicfile.WithCheck(func(tmp string) error {
		// Load the bytes about to be installed exactly as a runtime's
		// CDI cache will (ReadSpec parses strictly and validates).
		if _, err := cdilib.ReadSpec(tmp, 0); err != nil {
			return fmt.Errorf("rejected by the CDI library: %w", err)
		}
		return nil
	}))
	if err != nil {
		return false, fmt.Errorf("CDI spec: %w", err)
	}
	return true, nil
}

func (w *Writer) remove(name string) error {
	path := filepath.Join(w.dir, name)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove CDI spec %s: %w", path, err)
	}
	return nil
}
