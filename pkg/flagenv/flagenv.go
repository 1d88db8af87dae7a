// Package flagenv lets every flag of a FlagSet also be set by an
// environment variable, so DaemonSets and systemd units can configure the
// binaries either way.
//
// The variable for flag "pod-resources-socket" with prefix "DRI_CDI_NRI"
// is DRI_CDI_NRI_POD_RESOURCES_SOCKET. A flag given on the command line
// wins over the environment.
package flagenv

import (
	"flag"
	"fmt"
	"strings"
)

// Prefix starts the environment variable of every flag of every dri-cdi
// binary: --sysfs-root is also DRI_CDI_SYSFS_ROOT.
const Prefix = "DRI_CDI"

// EnvName returns the environment variable that sets a flag.
func EnvName(prefix, flagName string) string {
	n := strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flagName))
	if prefix == "" {
		return n
	}
	return prefix + "_" + n
}

// Apply sets every flag of fs that was not given on the command line from
// its environment variable, if set. lookup is os.LookupEnv in production.
// Call it after fs.Parse. An invalid value is an error that names the
// variable.
func Apply(fs *flag.FlagSet, prefix string, lookup func(string) (string, bool)) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] {
			return
		}
		name := EnvName(prefix, f.Name)
		v, ok := lookup(name)
		if !ok {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("invalid value %q for environment variable %s: %w", v, name, e)
		}
	})
	return err
}

// Usage appends the environment variable of each flag to its help text.
func Usage(fs *flag.FlagSet, prefix string) {
	fs.VisitAll(func(f *flag.Flag) {
		f.Usage += fmt.Sprintf(" (env %s)", EnvName(prefix, f.Name))
	})
}
