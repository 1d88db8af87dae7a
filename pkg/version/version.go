// Package version holds the build version, set by the linker.
package version

// Version is set with -ldflags "-X github.com/dri-cdi/dri-cdi/pkg/version.Version=..."
// (make stamps `git describe`). Its default is the release version, the
// VERSION file at the repository root, so that a plain `go build` or
// `go install ...@vX.Y.Z` reports the release it was built from;
// deployments/test checks that the two agree.
var Version = "v0.1.0"
