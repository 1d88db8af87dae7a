// Command dri-cdi is the operator CLI of dri-cdi: it shows the node's DRM
// cards and generates, lists and validates CDI specs. See pkg/cli.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/dri-cdi/dri-cdi/pkg/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv})
	stop()
	os.Exit(code)
}
