// Command demo shows, on this machine, the bug dri-cdi fixes and the fix:
// it starts a real kubelet, containerd and runc on private paths with a
// fake GPU, opens the GPU's render node from a hostPath pod (EPERM), then
// from a pod that requests the GPU through dri-cdi (ENXIO: allowed), and
// cleans up. It must run as root.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		os.Exit(1)
	}
}
