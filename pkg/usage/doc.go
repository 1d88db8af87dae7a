// Package usage reports what each container does with each GPU: engine
// busy time, memory and open clients per container and card, read from
// the DRM usage stats the kernel writes into /proc/<pid>/fdinfo/<fd> of
// every open DRM (major 226) and accel (major 261) file
// (Documentation/gpu/drm-usage-stats.rst).
//
// # Reading
//
// A Reader walks a proc root (injected: /proc on a host, the host's /proc
// mounted elsewhere in a container, a fake tree in tests). For each
// process it lists fd/, keeps the fds that are DRM or accel character
// devices, parses their fdinfo (ParseFDInfo) and reads the process's comm
// and cgroup. A process that exits mid-scan is left out; one that cannot
// be read is counted, never fatal.
//
// # Attribution
//
// ParseCgroup maps a process to its pod UID and container ID from the
// kubelet's cgroup layout (v1 and v2, cgroupfs and systemd drivers). A
// Namer turns those into namespace, pod and container names; BundleNamer
// reads the annotations containerd's CRI plugin writes into each
// container's OCI bundle. Processes outside any pod are the host's.
//
// # Claims
//
// A Monitor given a ClaimSource (dri-cdi-dra) asks it once per scan which
// DRA claims each named container holds its cards through, and lists them
// in the container's row of each card with what each was promised
// (Claim.Promised); a failed call keeps the last answer. The collector
// serves them as dri_cdi_usage_claim_shares and
// dri_cdi_usage_claim_promised_ratio.
//
// # Counting
//
// A Monitor turns scans into figures per (container, card): each
// (card, drm-client-id) counts once, however many fds and processes share
// it; counters keep the largest value seen, as the kernel asks; a client
// that exits keeps its busy time in its container's counter, so the
// counter never decreases while the container lives; drm-cycles over
// drm-total-cycles becomes busy time, while drm-cycles over drm-maxfreq is
// kept apart as time at the top frequency. Engine names become classes
// (ClassOf). The last completed scan is published as an immutable
// Snapshot; Collector serves it as Prometheus metrics.
//
// # Example
//
//	m := usage.NewMonitor(usage.Options{ProcRoot: "/host/proc", Namer: usage.NewBundleNamer(usage.DefaultBundleDir)})
//	go m.Run(ctx, usage.DefaultInterval)
//	registry.MustRegister(usage.NewCollector(m))
package usage
