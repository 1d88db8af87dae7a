package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
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

	type definition struct {
		file string
		dir  int
	}
	var (
		problems = map[string][]string{} // file (or dir) -> problems
		defs     = map[string][]definition{}
		good     []string
		files    int
		devNames = map[string][]string{}
	)
	for i, dir := range dirs.dirs {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			problems[dir] = append(problems[dir], fmt.Sprintf("cannot list spec dir: %v", err))
			continue
		}
		for _, e := range entries {
			// The same selection as the CDI library's directory scan.
			if e.IsDir() || (filepath.Ext(e.Name()) != ".yaml" && filepath.Ext(e.Name()) != ".json") {
				continue
			}
			path := filepath.Join(dir, e.Name())
			files++
			spec, err := cdi.ReadSpec(path)
			if err != nil {
				var se *cdi.SpecError
				msg := err.Error()
				if errors.As(err, &se) {
					msg = strings.TrimPrefix(msg, cdi.ErrInvalidSpec.Error()+" "+path+": ")
				}
				problems[path] = append(problems[path], msg)
				continue
			}
			good = append(good, path)
			for _, d := range spec.Devices {
				name := cdi.QualifiedName(spec.Kind, d.Name)
				defs[name] = append(defs[name], definition{file: path, dir: i})
				devNames[path] = append(devNames[path], name)
			}
		}
	}

	for _, name := range slices.Sorted(maps.Keys(defs)) {
		ds := defs[name]
		for a := range ds {
			for b := range ds {
				switch {
				case a == b:
				case ds[a].dir == ds[b].dir:
					problems[ds[a].file] = append(problems[ds[a].file],
						fmt.Sprintf("device %s is also defined in %s; a runtime resolves neither", name, ds[b].file))
				case ds[a].dir < ds[b].dir:
					fmt.Fprintf(env.Stderr, "note: device %s in %s is overridden by %s\n", name, ds[a].file, ds[b].file)
				}
			}
		}
	}

	sort.Strings(good)
	for _, path := range good {
		if len(problems[path]) == 0 {
			fmt.Fprintf(env.Stdout, "ok %s: %s\n", path, strings.Join(devNames[path], ", "))
		}
	}
	n := 0
	for _, path := range slices.Sorted(maps.Keys(problems)) {
		for _, p := range problems[path] {
			fmt.Fprintf(env.Stderr, "%s: %s\n", path, p)
			n++
		}
	}
	if files == 0 && n == 0 {
		fmt.Fprintf(env.Stderr, "no spec files in %s\n", strings.Join(dirs.dirs, ", "))
	}
	if n > 0 {
		return fmt.Errorf("cdi validate: %d problems found", n)
	}
	return nil
}
