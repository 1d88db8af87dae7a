// Package cdi turns discovered DRM cards into Container Device Interface
// (CDI) spec files, keeps those files in step with the cards on the node,
// and reads them back for the NRI plugin.
//
// # Spec files
//
// For kind K = "<vendor>/<class>" (DefaultKind is "dri-cdi.dev/gpu") every
// advertised card gets its own spec file holding one device named by the
// card ID, and one more file holds the device AllDevice ("all") with the
// nodes of every card:
//
//	<vendor>-<class>_<card ID with ':' as '-'>.yaml   e.g. dri-cdi.dev-gpu_0000-00-02.0.yaml
//	<vendor>-<class>_all.yaml                          e.g. dri-cdi.dev-gpu_all.yaml
//
// The "<vendor>-<class>_" prefix is the CDI library's own naming scheme
// (GenerateTransientSpecName), so the files sort together with other
// vendors' files and are easy to recognise. One file per card means a
// card that comes or goes changes exactly two files (its own and the
// "all" file) and never rewrites the spec of a card a running container
// depends on.
//
// # Generation
//
// Generate is pure: cards in, encoded and validated files out. Each
// device node carries the container path, host path, type "c", the
// major/minor numbers, permissions "rw" and the host node's gid when it
// is not 0, and deliberately no uid or fileMode (see the comments in
// generate.go and docs/architecture.md, "Device ownership", for why). cdiVersion is
// the lowest version the content needs, so older runtimes read the files
// too.
//
// # Writing
//
// A Writer owns every file with its kind's prefix in one directory. Sync
// writes each changed file atomically (temporary file in the same
// directory, fsync, rename, fsync of the directory), leaves unchanged
// files alone, removes the files of cards that are gone, and never
// touches a file it does not own:
//
//	w, err := cdi.NewWriter("/var/run/cdi", cdi.DefaultKind, cdi.WithLogger(log))
//	if err != nil {
//		return err
//	}
//	changed, err := w.Sync(inventory.Cards)
//
// # Reading
//
// Scan is the one reader of spec directories: it selects the files a
// container runtime would (or, with OnlyKind, the files of one kind),
// validates each with the CDI library exactly as the runtime does, and
// reports every file's outcome, the device names defined twice in one
// directory and those a later directory overrides. `dri-cdi cdi validate`
// and the doctor present its results; LoadDevices turns the files of one
// kind into device name → nodes for the NRI plugin.
package cdi
