// Package gctune sets the garbage collector default of dri-cdi's
// long-running daemons (dri-cdi-agent, dri-cdi-nri, dri-cdi-dra).
//
// Their live heap is about 1 MB, far below the 4 MB the Go runtime lets a
// heap reach before its first collection at the default GOGC=100 (the
// minimum heap scales with GOGC). Between collections the heap grows to
// that minimum and the pages stay resident, so half of the daemons'
// anonymous memory was garbage waiting for a collection. GOGC=50 halves
// that minimum to 2 MB; a collection of a 1 MB heap takes well under a
// millisecond of CPU, and the daemons allocate little outside their
// rare hot-path calls. docs/performance.md (Memory) has the measurements.
package gctune

import (
	"os"
	"runtime/debug"
)

// DefaultGCPercent is the GOGC the daemons run with when the environment
// does not set one.
const DefaultGCPercent = 50

// Apply sets the garbage collector's percent to DefaultGCPercent unless
// GOGC is set in the environment, which then stays in charge (the runtime
// has already read it). It returns the percent in effect.
func Apply() int {
	return apply(os.LookupEnv)
}

func apply(lookup func(string) (string, bool)) int {
	if _, set := lookup("GOGC"); set {
		cur := debug.SetGCPercent(100)
		debug.SetGCPercent(cur)
		return cur
	}
	debug.SetGCPercent(DefaultGCPercent)
	return DefaultGCPercent
}
