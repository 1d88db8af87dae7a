// Package docs holds the user documentation of dri-cdi as Markdown files.
// Its tests check the reference pages against the code: the configuration
// fields against pkg/config and the flags against each binary.
package docs
