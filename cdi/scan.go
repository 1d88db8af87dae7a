package cdi

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"
)

var (
	// ErrInvalidSpec is wrapped by every error about one spec file.
	ErrInvalidSpec = errors.New("invalid CDI spec file")
	// ErrOtherKind is wrapped by the error of a file named for the kind
	// Scan was limited to (OnlyKind) that holds another kind.
	ErrOtherKind = errors.New("spec of another kind")
)

// ScanResult is what Scan found in its directories.
type ScanResult struct {
	// Dirs are the directories, in the order given.
	Dirs []ScannedDir
	// Files are the spec files, in directory order and, within one
	// directory, in name order.
	Files []SpecFile
	// Duplicates are the device names that two or more valid files of one
	// directory define. A runtime's CDI cache resolves such a name to none
	// of them.
	Duplicates []Duplicate
	// Overrides are the device names that a file of a later directory
	// defines again; a runtime uses the later one.
	Overrides []Override
}

// ScannedDir is one directory of a scan.
type ScannedDir struct {
	// Path is the directory as given.
	Path string
	// Err is nil when the directory was listed. It wraps fs.ErrNotExist
	// when the directory does not exist (nothing has been written to it
	// yet), and names the directory.
	Err error
}

// SpecFile is one spec file of a scan.
type SpecFile struct {
	// Path is the file as named in its directory: Dirs[Dir].Path/name.
	Path string
	// Dir is the index of its directory in ScanResult.Dirs.
	Dir int
	// Spec is the parsed and validated spec; nil when Err is set.
	Spec *cdilib.Spec
	// Err says why the file is unusable: a *SpecError that wraps
	// ErrInvalidSpec, and ErrOtherKind for a file of another kind.
	Err error
}

// Duplicate is a device name that several files of one directory define.
type Duplicate struct {
	// Kind and Device make the qualified name Kind=Device.
	Kind, Device string
	// Files are the files that define it, in scan order.
	Files []string
}

// Override is a device name that a later directory defines again.
type Override struct {
	// Kind and Device make the qualified name Kind=Device.
	Kind, Device string
	// File defines it in an earlier directory, By in a later one.
	File, By string
}

// ScanOption changes what Scan reads and how.
type ScanOption func(*scanner)

// OnlyKind limits Scan to the files a Writer for kind owns, those whose
// names start with FilePrefix(kind). Such a file holding another kind
// gets an error wrapping ErrOtherKind, unless that kind's own prefix names
// it too (FilePrefix("v/c_x") starts with FilePrefix("v/c")): it is that
// kind's file, and left out.
func OnlyKind(kind string) ScanOption {
	return func(s *scanner) { s.kind = kind }
}

// WithResolve makes Scan open resolve(p) for every directory and file p
// it names, for example p inside a mounted host root. Results name p.
func WithResolve(resolve func(p string) string) ScanOption {
	return func(s *scanner) { s.resolve = resolve }
}

type scanner struct {
	kind, prefix string
	resolve      func(string) string
}

// Scan reads the CDI spec files in dirs, lowest priority first, the way a
// container runtime's CDI cache does: every *.yaml and *.json file
// directly in each directory (no subdirectories), each loaded with the
// CDI library's parse and validation. It returns every file's outcome,
// the device names defined twice in one directory and the names a later
// directory overrides. A directory that cannot be listed is a result, not
// an error; a file removed since the listing is left out. Scan's only
// error is an invalid OnlyKind kind.
func Scan(dirs []string, opts ...ScanOption) (*ScanResult, error) {
	s := scanner{resolve: func(p string) string { return p }}
	for _, o := range opts {
		o(&s)
	}
	if s.kind != "" {
		prefix, err := FilePrefix(s.kind)
		if err != nil {
			return nil, err
		}
		s.prefix = prefix
	}
	res := &ScanResult{}
	for i, dir := range dirs {
		sd := ScannedDir{Path: dir}
		entries, err := os.ReadDir(s.resolve(dir))
		if err != nil {
			sd.Err = fmt.Errorf("list CDI spec dir %s: %w", dir, err)
		}
		res.Dirs = append(res.Dirs, sd)
		for _, e := range entries {
			if f, ok := s.file(dir, i, e); ok {
				res.Files = append(res.Files, f)
			}
		}
	}
	res.Duplicates, res.Overrides = definitions(res.Files)
	return res, nil
}

// file reads one directory entry; ok is false for an entry that is not a
// spec file Scan reads.
func (s *scanner) file(dir string, i int, e fs.DirEntry) (SpecFile, bool) {
	name := e.Name()
	if ext := filepath.Ext(name); e.IsDir() || (ext != ".yaml" && ext != ".json") || !strings.HasPrefix(name, s.prefix) {
		return SpecFile{}, false
	}
	path := filepath.Join(dir, name)
	spec, err := readSpec(path, s.resolve(path))
	if errors.Is(err, fs.ErrNotExist) {
		return SpecFile{}, false // removed since the listing
	}
	if err == nil && s.kind != "" && spec.Kind != s.kind {
		if otherKindsFile(name, spec.Kind) {
			return SpecFile{}, false // another kind's prefix starts with ours: v-c_x_ for v/c_x
		}
		spec, err = nil, &SpecError{Path: path, Err: fmt.Errorf("%w %q, want %q", ErrOtherKind, spec.Kind, s.kind)}
	}
	return SpecFile{Path: path, Dir: i, Spec: spec, Err: err}, true
}

// otherKindsFile reports whether name is a file name FileName gives for
// kind: a file a Writer of that kind owns.
func otherKindsFile(name, kind string) bool {
	prefix, err := FilePrefix(kind)
	return err == nil && strings.HasPrefix(name, prefix)
}

// definitions finds, among the valid files, the names defined twice in
// one directory and those a later directory overrides.
func definitions(files []SpecFile) ([]Duplicate, []Override) {
	type definition struct {
		file string
		dir  int
	}
	type key struct{ kind, device string }
	defs := map[key][]definition{}
	for _, f := range files {
		if f.Err != nil {
			continue
		}
		for _, d := range f.Spec.Devices {
			k := key{f.Spec.Kind, d.Name}
			defs[k] = append(defs[k], definition{file: f.Path, dir: f.Dir})
		}
	}
	var dups []Duplicate
	var overrides []Override
	keys := slices.SortedFunc(maps.Keys(defs), func(a, b key) int {
		return strings.Compare(QualifiedName(a.kind, a.device), QualifiedName(b.kind, b.device))
	})
	for _, k := range keys {
		ds := defs[k]
		byDir := map[int][]string{}
		for a, da := range ds {
			byDir[da.dir] = append(byDir[da.dir], da.file)
			for _, db := range ds[a+1:] {
				if da.dir < db.dir {
					overrides = append(overrides, Override{Kind: k.kind, Device: k.device, File: da.file, By: db.file})
				}
			}
		}
		for _, dir := range slices.Sorted(maps.Keys(byDir)) {
			if files := byDir[dir]; len(files) > 1 {
				dups = append(dups, Duplicate{Kind: k.kind, Device: k.device, Files: files})
			}
		}
	}
	return dups, overrides
}

// SpecError is an error about one spec file. Its message names the file
// and fits on one line; it wraps ErrInvalidSpec and the cause.
type SpecError struct {
	// Path is the spec file.
	Path string
	// Err is the reason.
	Err error
	// opened is the path the file was read from when it differs from
	// Path (WithResolve).
	opened string
}

// Error returns "invalid CDI spec file <path>: <reason>" on one line.
func (e *SpecError) Error() string {
	return ErrInvalidSpec.Error() + " " + e.Path + ": " + e.Reason()
}

// Reason is the message of Err on one line, without the file's path that
// the CDI library's messages repeat.
func (e *SpecError) Reason() string {
	msg := e.Err.Error()
	for _, p := range []string{e.Path, e.opened} {
		if p != "" {
			msg = strings.ReplaceAll(msg, " "+strconv.Quote(p), "")
		}
	}
	return strings.Join(strings.Fields(msg), " ")
}

// Unwrap returns ErrInvalidSpec and the cause.
func (e *SpecError) Unwrap() []error { return []error{ErrInvalidSpec, e.Err} }

// readSpec loads the spec file path, read from opened, with the CDI
// library's ReadSpec, the strict parse and validation a runtime's CDI
// cache applies to every file. A missing file gives an error wrapping
// fs.ErrNotExist; any other failure a *SpecError.
func readSpec(path, opened string) (*cdilib.Spec, error) {
	spec, err := cdilib.ReadSpec(opened, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read CDI spec %s: %w", path, err)
	}
	if err != nil {
		return nil, &SpecError{Path: path, Err: err, opened: opened}
	}
	return spec, nil
}
