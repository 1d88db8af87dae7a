// Package atomicfile replaces files so that a reader, or a crash, sees
// the old content or the new one, never a mix or a short file. It is the
// one atomic writer of dri-cdi: the CDI spec writer and the DRA plugin's
// checkpoint both go through it, with the same guarantees.
//
// # Guarantees
//
// Write creates a temporary file in the target's own directory (rename(2)
// is atomic only within one filesystem), writes the data, sets the mode
// explicitly (the umask must not decide who can read the file), fsyncs
// it, lets an optional check read it, renames it over the target and
// fsyncs the directory, so that the rename itself survives a crash. Every
// error names the target path; a directory sync that fails is reported
// as ErrDirSync, since the new content is then in place but may not
// survive a crash.
//
// Temporary files are named "." + <target name> + ".tmp-" + [<tag> "-"]
// <random>: hidden, and never ending in the target's extension, so a
// watcher that loads "*.yaml" or "*.json" (a runtime's CDI cache) ignores
// them; the optional tag (WithTempTag) names the writer.
//
// # Example
//
//	err := atomicfile.Write("/var/run/cdi/x.json", data, 0o644)
//	if errors.Is(err, atomicfile.ErrDirSync) { ... } // written, maybe not durable
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TempMarker separates a temporary file's target name from its random
// suffix.
const TempMarker = ".tmp-"

// ErrDirSync is returned (wrapped) when the file was renamed into place
// but the directory could not be synced.
var ErrDirSync = errors.New("directory sync failed")

// Option changes one Write.
type Option func(*options)

type options struct {
	check       func(tmpPath string) error
	skipDirSync bool
	tag         string
}

// WithTempTag puts tag into the temporary file's name (see TempPattern),
// so that a writer that cleans up temporary files left by a crash can
// tell its own from those of another writer in the same directory whose
// target names can look alike. tag must not contain '/'.
func WithTempTag(tag string) Option {
	return func(o *options) { o.tag = tag }
}

// WithCheck makes Write call check with the complete, synced temporary
// file before it renames it into place; an error from check leaves the
// target untouched.
func WithCheck(check func(tmpPath string) error) Option {
	return func(o *options) { o.check = check }
}

// WithoutDirSync leaves the directory sync to the caller, who writes
// several files and then calls SyncDir once: the renames are durable only
// after that call.
func WithoutDirSync() Option {
	return func(o *options) { o.skipDirSync = true }
}

// Write atomically replaces path with data and mode perm (see the package
// doc for the steps).
func Write(path string, data []byte, perm fs.FileMode, opts ...Option) error {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := write(path, data, perm, o); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if o.skipDirSync {
		return nil
	}
	return SyncDir(filepath.Dir(path))
}

func write(path string, data []byte, perm fs.FileMode, o options) error {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, TempPattern(name, o.tag))
	if err != nil {
		return err
	}
	tmpPath := tmp.Name()
	renamed := false
	defer func() {
		if !renamed {
			_ = tmp.Close()
			_ = os.Remove(tmpPath)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if o.check != nil {
		if err := o.check(tmpPath); err != nil {
			return err
		}
	}
	if err := os.Rename(tmpPath, path); err != nil {
		return err
	}
	renamed = true
	return nil
}

// SyncDir makes the renames and removals in dir durable. Its error wraps
// ErrDirSync and names dir.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w: %w", dir, ErrDirSync, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w: %w", dir, ErrDirSync, err)
	}
	return nil
}

// TempPattern is the os.CreateTemp pattern of the temporary files of
// target name: "." + name + TempMarker + "*", or with a tag
// "." + name + TempMarker + tag + "-*".
func TempPattern(name, tag string) string {
	if tag == "" {
		return "." + name + TempMarker + "*"
	}
	return "." + name + TempMarker + tag + "-*"
}

// ParseTemp returns the target name and the tag ("" when none) of a
// temporary file name Write may have left behind (a crash between create
// and rename), and false for any other name.
func ParseTemp(name string) (target, tag string, ok bool) {
	if !strings.HasPrefix(name, ".") {
		return "", "", false
	}
	i := strings.LastIndex(name, TempMarker)
	if i <= 1 {
		return "", "", false
	}
	rest := name[i+len(TempMarker):]
	if j := strings.LastIndex(rest, "-"); j >= 0 {
		tag = rest[:j]
	}
	return name[1:i], tag, true
}
