// Command pause is the sandbox image's only program: it waits for SIGTERM
// or SIGINT and exits 0. It is built statically so the image needs no libc.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
