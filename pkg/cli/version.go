package cli

import (
	"context"
	"fmt"
	"runtime"

	"github.com/dri-cdi/dri-cdi/pkg/version"
)

func versionCommand() *Command {
	return &Command{Name: "version", Summary: "Print the version of dri-cdi", Run: runVersion}
}

func runVersion(_ context.Context, env *Env, args []string) error {
	f := newFlags("dri-cdi version", "", "Prints the version of dri-cdi and the Go toolchain it was built with.")
	f.finish()
	if err := f.parse(env, args, false); err != nil {
		return err
	}
	_, err := fmt.Fprintf(env.Stdout, "dri-cdi %s (%s, %s/%s)\n", version.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}
