// Package version holds the build version, set by the linker.
package version

// Version is set with -ldflags "-X github.com/dri-cdi/dri-cdi/pkg/version.Version=...".
var Version = "dev"
