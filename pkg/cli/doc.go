// Package cli implements the dri-cdi operator command line.
//
// # Commands
//
//	dri-cdi discover                     the DRM cards of this node (table, JSON or YAML)
//	dri-cdi cdi generate                 the CDI specs dri-cdi-agent writes for them
//	dri-cdi cdi list                     the CDI device names a runtime can resolve
//	dri-cdi cdi validate                 check every CDI spec file in the spec dirs
//	dri-cdi doctor                       check this node's runtime, kubelet and GPUs for dri-cdi
//	dri-cdi top                          what each pod and container does with each GPU
//	dri-cdi version                      the build version
//
// "dri-cdi help <command>" and "-h" print a command's usage. Every flag
// is also an environment variable: DRI_CDI_ followed by the flag name in
// upper case with '-' as '_' (--sysfs-root is DRI_CDI_SYSFS_ROOT). A flag
// on the command line wins over the variable.
//
// # Exit codes
//
// 0 on success, 1 when the command failed (or, for "cdi validate", found
// problems), 2 for a command line mistake.
//
// # Adding a command
//
// A command is a *Command in its own file, whose Run parses its flags
// with newFlags/parse and writes to Env.Stdout; one line in the table in
// commands.go makes dri-cdi dispatch to it.
package cli
