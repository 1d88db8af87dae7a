package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"
)

func cdiListCommand() *Command {
	return &Command{Name: "list", Summary: "List the CDI device names a runtime can resolve", Run: runCDIList}
}

const cdiListHelp = `Prints the fully qualified CDI device names found in the spec directories,
one per line (vendor.com/class=name), for every vendor: the names a
container runtime configured with the same directories resolves. The CDI
library resolves them: a later directory overrides an earlier one, and a
name defined twice in one directory is dropped. Invalid spec files are
reported on stderr; a missing directory is not an error.`

// defaultSpecDirs are the CDI library's (and containerd's) defaults.
func defaultSpecDirs() *dirList {
	return &dirList{dirs: append([]string(nil), cdilib.DefaultSpecDirs...)}
}

func runCDIList(_ context.Context, env *Env, args []string) error {
	f := newFlags("dri-cdi cdi list", "[flags]", cdiListHelp)
	dirs := defaultSpecDirs()
	f.Var(dirs, "spec-dir", "CDI spec directory, lowest priority first; repeat or separate with ':'")
	output := f.output("text", "json")
	f.finish()
	if err := f.parse(env, args, false); err != nil {
		return err
	}
	readable, dirErr := readableDirs(dirs.dirs)
	for _, err := range dirErr {
		fmt.Fprintf(env.Stderr, "error: %v\n", err)
	}

	type device struct {
		Name string `json:"name"`
		Spec string `json:"spec"`
	}
	devices := []device{}
	// An empty dir list would make the library fall back to its defaults.
	if len(readable) > 0 {
		cache, err := cdilib.NewCache(cdilib.WithSpecDirs(readable...), cdilib.WithAutoRefresh(false))
		if err != nil {
			return fmt.Errorf("load CDI specs: %w", err)
		}
		errs := cache.GetErrors()
		for _, path := range slices.Sorted(maps.Keys(errs)) {
			for _, err := range errs[path] {
				env.warnf("%s: %s", path, oneLine(err))
			}
		}
		for _, name := range cache.ListDevices() {
			d := device{Name: name}
			if dev := cache.GetDevice(name); dev != nil {
				d.Spec = dev.GetSpec().GetPath()
			}
			devices = append(devices, d)
		}
	}

	if *output == "json" {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(devices); err != nil {
			return err
		}
	} else {
		for _, d := range devices {
			fmt.Fprintln(env.Stdout, d.Name)
		}
	}
	if len(dirErr) > 0 {
		return fmt.Errorf("%d spec directories could not be read", len(dirErr))
	}
	return nil
}

// readableDirs returns the dirs that exist and can be listed, in order,
// and one error for each that exists but cannot be read. The CDI library
// stops scanning at such a dir without saying so, so it must not see one.
func readableDirs(dirs []string) ([]string, []error) {
	var ok []string
	var errs []error
	for _, d := range dirs {
		_, err := os.ReadDir(d)
		switch {
		case err == nil:
			ok = append(ok, d)
		case errors.Is(err, fs.ErrNotExist):
		default:
			errs = append(errs, fmt.Errorf("spec dir %s: %w", d, err))
		}
	}
	return ok, errs
}

// oneLine flattens a multi-line error message.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
