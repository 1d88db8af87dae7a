package hostlayout

import (
	"bufio"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

//go:embed layouts/*.txt
var layouts embed.FS

// ErrUnknownLayout is returned for a layout name without a listing.
var ErrUnknownLayout = errors.New("unknown host layout")

// ErrSyntax is wrapped by errors about a malformed listing line.
var ErrSyntax = errors.New("invalid layout line")

// Kind is the type of one listed entry.
type Kind byte

// Entry kinds, as written in a listing.
const (
	Dir        Kind = 'd'
	File       Kind = 'f'
	Link       Kind = 'l'
	BrokenLink Kind = 'L'
	Char       Kind = 'c'
	FIFO       Kind = 'p'
)

// Entry is one line of a listing.
type Entry struct {
	Kind Kind
	// Path is relative to the tree root.
	Path string
	// Content is the content of a File.
	Content string
	// Target is the target of a Link or BrokenLink, as written.
	Target string
	// Major, Minor, Mode, UID and GID describe a Char node.
	Major, Minor uint32
	Mode         os.FileMode
	UID, GID     int
}

// Names returns the layouts that describe a whole host, sorted.
func Names() []string {
	des, _ := fs.ReadDir(layouts, "layouts")
	var out []string
	for _, de := range des {
		name := strings.TrimSuffix(de.Name(), ".txt")
		if !strings.HasPrefix(name, "_") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Entries returns the entries of a layout, includes expanded, in listing
// order.
func Entries(name string) ([]Entry, error) {
	return entries(name, map[string]bool{})
}

func entries(name string, seen map[string]bool) ([]Entry, error) {
	if seen[name] {
		return nil, fmt.Errorf("layout %s: include cycle", name)
	}
	seen[name] = true
	defer delete(seen, name)
	data, err := layouts.ReadFile("layouts/" + name + ".txt")
	if err != nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownLayout, name)
	}
	var out []Entry
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if inc, ok := strings.CutPrefix(line, "include "); ok {
			sub, err := entries(strings.TrimSpace(inc), seen)
			if err != nil {
				return nil, fmt.Errorf("layout %s line %d: %w", name, n, err)
			}
			out = append(out, sub...)
			continue
		}
		e, err := ParseLine(line)
		if err != nil {
			return nil, fmt.Errorf("layout %s line %d: %w", name, n, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// ParseLine parses one entry line of a listing.
func ParseLine(line string) (Entry, error) {
	fields := strings.Fields(line)
	if len(fields) < 2 || len(fields[0]) != 1 {
		return Entry{}, fmt.Errorf("%w %q", ErrSyntax, line)
	}
	e := Entry{Kind: Kind(fields[0][0]), Path: fields[1]}
	if path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path || strings.HasPrefix(e.Path, "..") {
		return Entry{}, fmt.Errorf("%w %q: path must be clean and relative", ErrSyntax, line)
	}
	switch e.Kind {
	case Dir, FIFO:
		if len(fields) != 2 {
			return Entry{}, fmt.Errorf("%w %q: want %c <path>", ErrSyntax, line, e.Kind)
		}
	case File:
		// The content is the rest of the line after the path, quoted.
		rest := strings.TrimLeft(strings.TrimSpace(line)[1:], " \t")
		rest = strings.TrimSpace(strings.TrimPrefix(rest, fields[1]))
		c, err := strconv.Unquote(rest)
		if err != nil {
			return Entry{}, fmt.Errorf("%w %q: content must be a Go-quoted string", ErrSyntax, line)
		}
		e.Content = c
	case Link, BrokenLink:
		if len(fields) != 3 {
			return Entry{}, fmt.Errorf("%w %q: want %c <path> <target>", ErrSyntax, line, e.Kind)
		}
		e.Target = fields[2]
	case Char:
		if len(fields) != 5 {
			return Entry{}, fmt.Errorf("%w %q: want c <path> <major>:<minor> <mode> <uid>:<gid>", ErrSyntax, line)
		}
		maj, mnr, ok := strings.Cut(fields[2], ":")
		a, err1 := strconv.ParseUint(maj, 10, 32)
		b, err2 := strconv.ParseUint(mnr, 10, 32)
		m, err3 := strconv.ParseUint(fields[3], 8, 32)
		u, g, ok2 := strings.Cut(fields[4], ":")
		uid, err4 := strconv.Atoi(u)
		gid, err5 := strconv.Atoi(g)
		if !ok || !ok2 || errors.Join(err1, err2, err3, err4, err5) != nil || m > 0o777 {
			return Entry{}, fmt.Errorf("%w %q: bad numbers", ErrSyntax, line)
		}
		e.Major, e.Minor, e.Mode, e.UID, e.GID = uint32(a), uint32(b), os.FileMode(m), uid, gid
	default:
		return Entry{}, fmt.Errorf("%w %q: unknown kind %q", ErrSyntax, line, fields[0])
	}
	return e, nil
}

// Build writes layout name under root and returns the roots discovery
// reads it through: <root>/sys and <root>/dev. Char nodes need root
// (mknod); without it Build fails, and tests should skip with
// drmtest.SkipUnlessRoot first.
func Build(root, name string) (drm.Roots, error) {
	es, err := Entries(name)
	if err != nil {
		return drm.Roots{}, err
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return drm.Roots{}, fmt.Errorf("layout %s: root %q: %w", name, root, err)
	}
	for _, d := range []string{"sys", "dev"} {
		if err := os.MkdirAll(filepath.Join(abs, d), 0o755); err != nil {
			return drm.Roots{}, fmt.Errorf("layout %s: %w", name, err)
		}
	}
	for _, e := range es {
		if err := write(abs, e); err != nil {
			return drm.Roots{}, fmt.Errorf("layout %s: %s: %w", name, e.Path, err)
		}
	}
	return drm.Roots{Sysfs: filepath.Join(abs, "sys"), Dev: filepath.Join(abs, "dev")}, nil
}

func write(root string, e Entry) error {
	p := filepath.Join(root, filepath.FromSlash(e.Path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	switch e.Kind {
	case Dir:
		return os.MkdirAll(p, 0o755)
	case File:
		if err := os.WriteFile(p, []byte(e.Content), 0o444); err != nil {
			return err
		}
		return os.Chmod(p, 0o444)
	case Link, BrokenLink:
		return os.Symlink(e.Target, p)
	case FIFO:
		return unix.Mkfifo(p, 0o644)
	case Char:
		if err := unix.Mknod(p, unix.S_IFCHR|uint32(e.Mode), int(unix.Mkdev(e.Major, e.Minor))); err != nil {
			return fmt.Errorf("mknod: %w", err)
		}
		if err := os.Chmod(p, e.Mode); err != nil {
			return err
		}
		return os.Lchown(p, e.UID, e.GID)
	}
	return fmt.Errorf("%w: kind %q", ErrSyntax, e.Kind)
}

// CheckLinks reports every symlink of layout name, built under root, that
// does not do what the listing says: an "l" link must resolve inside
// root, an "L" link must not resolve. It catches typos in the relative
// targets of a listing.
func CheckLinks(root, name string) error {
	es, err := Entries(name)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range es {
		if e.Kind != Link && e.Kind != BrokenLink {
			continue
		}
		p := filepath.Join(abs, filepath.FromSlash(e.Path))
		r, err := filepath.EvalSymlinks(p)
		switch {
		case e.Kind == Link && err != nil:
			errs = append(errs, fmt.Errorf("%s -> %s does not resolve: %w", e.Path, e.Target, err))
		case e.Kind == Link && !strings.HasPrefix(r, abs+"/"):
			errs = append(errs, fmt.Errorf("%s -> %s leaves the root: %s", e.Path, e.Target, r))
		case e.Kind == BrokenLink && err == nil:
			errs = append(errs, fmt.Errorf("%s -> %s resolves to %s but is listed as broken", e.Path, e.Target, r))
		}
	}
	return errors.Join(errs...)
}
