// Command build writes the dri-cdi container image as an OCI image-layout
// tarball with one index for several platforms, without docker.
//
// Content and metadata come from the final stage of
// deployments/container/Dockerfile (files, labels, user, entrypoint); the
// binaries come from `make build-cross` (one directory per platform). The
// index carries the image reference in the annotations that
// `ctr images import` and `k3s ctr images import` read, so the import gives
// the image exactly the name the manifests use.
//
//	go run . -dockerfile ../Dockerfile -ref ghcr.io/dri-cdi/dri-cdi:v0.1.0 \
//	  -version v0.1.0 -platform linux/amd64=../../../_output/linux-amd64 \
//	  -platform linux/arm64=../../../_output/linux-arm64 -out dri-cdi-image.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

type platforms []string

func (p *platforms) String() string     { return strings.Join(*p, ",") }
func (p *platforms) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	var o options
	var plats platforms
	flag.StringVar(&o.dockerfile, "dockerfile", "deployments/container/Dockerfile", "Dockerfile whose final stage describes the image")
	flag.StringVar(&o.ref, "ref", "", "image reference the archive names, e.g. ghcr.io/dri-cdi/dri-cdi:v0.1.0 (required)")
	flag.StringVar(&o.version, "version", "dev", "build version, for the ${VERSION} label")
	flag.StringVar(&o.out, "out", "_output/dri-cdi-image.tar", "archive to write")
	flag.Var(&plats, "platform", "os/arch=dir with that platform's binaries (repeatable, required)")
	flag.Parse()
	for _, p := range plats {
		plat, dir, ok := strings.Cut(p, "=")
		os_, arch, ok2 := strings.Cut(plat, "/")
		if !ok || !ok2 || dir == "" || os_ == "" || arch == "" {
			fmt.Fprintf(os.Stderr, "build: -platform %q: want os/arch=dir\n", p)
			os.Exit(2)
		}
		o.platforms = append(o.platforms, platformDir{os: os_, arch: arch, dir: dir})
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n", err)
		os.Exit(1)
	}
}
