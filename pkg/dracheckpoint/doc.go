// Package dracheckpoint is the format of dri-cdi-dra's checkpoint: the
// claims the DRA plugin prepared on this node, by claim UID, with the
// devices each one got.
//
// # Writers and readers
//
// dri-cdi-dra writes the file (Save, through the one atomic writer) and
// reads it back for unprepare and repeated prepares. dri-cdi-nri reads it
// too (Load), for one thing only: the device memory a share of a card was
// allocated (Device.Memory), which the kubelet's PodResources API does
// not report. The file is root-owned, mode 0600, on the host; what it
// records comes from the claim's allocation, which only the scheduler
// writes, so nothing in it is written by a pod author.
//
// # Compatibility
//
// The format is version 1. Fields added to it later are outside the
// frozen checksums an earlier version checks and inside a checksum of the
// file's bytes, so a file this version writes stays readable by the
// previous one (see the checkpoint type).
package dracheckpoint
