package hostlayout

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseLine(t *testing.T) {
	tests := map[string]struct {
		line string
		want Entry
		err  bool
	}{
		"dir":            {line: "d sys/class/drm", want: Entry{Kind: Dir, Path: "sys/class/drm"}},
		"file":           {line: `f sys/a/vendor "0x8086\n"`, want: Entry{Kind: File, Path: "sys/a/vendor", Content: "0x8086\n"}},
		"empty file":     {line: `f sys/a/uevent ""`, want: Entry{Kind: File, Path: "sys/a/uevent"}},
		"file spaces":    {line: `f sys/a/x "a b  c"`, want: Entry{Kind: File, Path: "sys/a/x", Content: "a b  c"}},
		"path is f":      {line: `f f "x"`, want: Entry{Kind: File, Path: "f", Content: "x"}},
		"link":           {line: "l sys/class/drm/card1 ../../devices/x/drm/card1", want: Entry{Kind: Link, Path: "sys/class/drm/card1", Target: "../../devices/x/drm/card1"}},
		"broken link":    {line: "L sys/class/drm/card6 card6", want: Entry{Kind: BrokenLink, Path: "sys/class/drm/card6", Target: "card6"}},
		"char":           {line: "c dev/kfd 237:0 0660 0:993", want: Entry{Kind: Char, Path: "dev/kfd", Major: 237, Mode: 0o660, GID: 993}},
		"fifo":           {line: "p sys/x/dev", want: Entry{Kind: FIFO, Path: "sys/x/dev"}},
		"unknown kind":   {line: "x sys/a", err: true},
		"no path":        {line: "d", err: true},
		"absolute path":  {line: "d /sys", err: true},
		"dotdot path":    {line: "d ../sys", err: true},
		"unclean path":   {line: "d sys//class", err: true},
		"unquoted":       {line: "f sys/a 0x8086", err: true},
		"link no target": {line: "l sys/a", err: true},
		"char bad dev":   {line: "c dev/x 226 0660 0:0", err: true},
		"char bad mode":  {line: "c dev/x 226:1 1777 0:0", err: true},
		"char bad owner": {line: "c dev/x 226:1 0660 root", err: true},
		"dir extra":      {line: "d sys/a b", err: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseLine(tc.line)
			if tc.err {
				require.ErrorIs(t, err, ErrSyntax)
				require.Contains(t, err.Error(), tc.line)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		"d sys/class/drm", `f sys/a "x\n"`, "l a b", "L a b", "c dev/x 226:1 0660 0:44", "p a", "f a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		e, err := ParseLine(line)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("error %v does not wrap ErrSyntax", err)
			}
			return
		}
		if e.Path == "" || filepath.IsAbs(e.Path) || filepath.Clean(e.Path) != e.Path {
			t.Fatalf("accepted path %q", e.Path)
		}
	})
}

func TestEveryLayoutParses(t *testing.T) {
	names := Names()
	require.NotEmpty(t, names)
	for _, n := range names {
		es, err := Entries(n)
		require.NoError(t, err, n)
		require.NotEmpty(t, es, n)
		seen := map[string]bool{}
		for _, e := range es {
			require.False(t, seen[e.Path], "%s lists %s twice", n, e.Path)
			seen[e.Path] = true
		}
	}
	_, err := Entries("no-such-host")
	require.ErrorIs(t, err, ErrUnknownLayout)
}

func TestBuildAndCheckLinks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create char device nodes with mknod")
	}
	for _, n := range Names() {
		t.Run(n, func(t *testing.T) {
			root := t.TempDir()
			roots, err := Build(root, n)
			require.NoError(t, err)
			require.Equal(t, filepath.Join(root, "sys"), roots.Sysfs)
			require.Equal(t, filepath.Join(root, "dev"), roots.Dev)
			require.NoError(t, CheckLinks(root, n))
		})
	}
	// CheckLinks notices a link whose target is missing.
	root := t.TempDir()
	_, err := Build(root, "hybrid-laptop")
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(root, "sys", "bus", "pci", "drivers", "i915")))
	err = CheckLinks(root, "hybrid-laptop")
	require.Error(t, err)
	require.Contains(t, err.Error(), "sys/devices/pci0000:00/0000:00:02.0/driver -> ../../../bus/pci/drivers/i915 does not resolve")
}
