package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/dri-cdi/dri-cdi/cdi"
)

func cdiValidateCommand() *Command {
	return &Command{Name: "validate", Summary: "Check every CDI spec file in the spec directories", Run: runCDIValidate}
}

const cdiValidateHelp = `Loads every CDI spec file (*.yaml, *.json) in the spec directories with the
CDI library, as a container runtime does, and checks that no device name is
defined by two files of one directory (a runtime drops such a device).
Prints "ok" and the device names of each good file; prints each problem on stderr with its file
and exits 1 when there is any. A name defined in two directories is not a
problem: the later directory overrides the earlier one, which is noted on
stderr. A missing directory is skipped.`

func runCDIValidate(_ context.Context, env *Env, args []string) error {
	f := newFlags("dri-cdi cdi validate", "[flags]", cdiValidateHelp)
	dirs := defaultSpecDirs()
	f.Var(dirs, "spec-dir", "CDI spec directory, lowest priority first; repeat or separate with ':'")
	f.finish()
	if err := f.parse(env, args, false); err != nil {
		return err
	}

	res, err := cdi.Scan(dirs.dirs)
	if err != nil {
		return err
	}
	problems := scanProblems(res)
	for _, o := range res.Overrides {
		fmt.Fprintf(env.Stderr, "note: device %s in %s is overridden by %s\n", cdi.QualifiedName(o.Kind, o.Device), o.File, o.By)
	}

	byPath := slices.SortedFunc(slices.Values(res.Files), func(a, b cdi.SpecFile) int { return strings.Compare(a.Path, b.Path) })
	for _, f := range byPath {
		if f.Err == nil && len(problems[f.Path]) == 0 {
			var names []string
			for _, d := range f.Spec.Devices {
				names = append(names, cdi.QualifiedName(f.Spec.Kind, d.Name))
			}
			fmt.Fprintf(env.Stdout, "ok %s: %s\n", f.Path, strings.Join(names, ", "))
		}
	}
	n := 0
	for _, path := range slices.Sorted(maps.Keys(problems)) {
		for _, p := range problems[path] {
			fmt.Fprintf(env.Stderr, "%s: %s\n", path, p)
			n++
		}
	}
	if len(res.Files) == 0 && n == 0 {
		fmt.Fprintf(env.Stderr, "no spec files in %s\n", strings.Join(dirs.dirs, ", "))
	}
	if n > 0 {
		return fmt.Errorf("cdi validate: %d problems found", n)
	}
	return nil
}

// scanProblems returns the problems of a scan by file (or directory): the
// files a runtime cannot load and the names it cannot resolve. A missing
// directory is no problem.
func scanProblems(res *cdi.ScanResult) map[string][]string {
	problems := map[string][]string{}
	for _, d := range res.Dirs {
		if d.Err != nil && !errors.Is(d.Err, fs.ErrNotExist) {
			problems[d.Path] = append(problems[d.Path], fmt.Sprintf("cannot list spec dir: %v", errors.Unwrap(d.Err)))
		}
	}
	for _, f := range res.Files {
		// The line names the file already; the reason is enough.
		var se *cdi.SpecError
		switch {
		case errors.As(f.Err, &se):
			problems[f.Path] = append(problems[f.Path], se.Reason())
		case f.Err != nil:
			problems[f.Path] = append(problems[f.Path], f.Err.Error())
		}
	}
	for _, d := range res.Duplicates {
		name := cdi.QualifiedName(d.Kind, d.Device)
		for _, a := range d.Files {
			for _, b := range d.Files {
				if a != b {
					problems[a] = append(problems[a], fmt.Sprintf("device %s is also defined in %s; a runtime resolves neither", name, b))
				}
			}
		}
	}
	return problems
}
