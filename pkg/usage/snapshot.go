package usage

import "time"

// Snapshot is the result of one completed scan, in a shape for both the
// metrics and dri-cdi top (-o json). It is never changed after it is
// published.
type Snapshot struct {
	// Time is when the scan ended.
	Time time.Time `json:"time"`
	// Interval is the wall time since the previous scan; the busy
	// fractions are over it. Zero for the first scan.
	Interval time.Duration `json:"interval"`
	// Cards hold the cards with at least one user, sorted by ID.
	Cards []CardUsage `json:"cards"`
	// Stats are the reader's own counts since start.
	Stats Stats `json:"stats"`
}

// Stats describe the scans: how many, and what the last one could not
// read; Malformed counts since the Monitor started.
type Stats struct {
	Scans int `json:"scans"`
	// Processes is the number of processes the last scan looked at.
	Processes int `json:"processes"`
	// Unreadable counts the processes (and fdinfo files) the last scan
	// could not read (EACCES: no CAP_SYS_PTRACE, an AppArmor denial).
	Unreadable int `json:"unreadable"`
	// Malformed counts skipped drm- lines in fdinfo files.
	Malformed int `json:"malformed"`
	// ScanSeconds is how long the last scan took.
	ScanSeconds float64 `json:"scanSeconds"`
}

// CardUsage is one card and who uses it.
type CardUsage struct {
	// ID is the card's stable ID (pkg/drm), or the fdinfo's drm-pdev,
	// or "<major>:<minor>" for a device discovery does not list.
	ID     string           `json:"id"`
	Driver string           `json:"driver"`
	Users  []ContainerUsage `json:"users"`
}

// Names of rows that are no named container. Neither is a valid
// Kubernetes name, so neither can be mistaken for one; and neither is
// empty, which Prometheus would treat as a missing label and fill with the
// scrape target's own namespace and pod.
const (
	// HostLabel is the namespace, pod and container of processes
	// outside any pod.
	HostLabel = "(host)"
	// UnknownLabel is the namespace of a container whose names could not
	// be read; its pod is the pod UID and its container the container ID.
	UnknownLabel = "(unknown)"
)

// ContainerUsage is one container's (or the host's) use of one card.
type ContainerUsage struct {
	Names
	Owner
	// Host is true for processes outside any pod.
	Host bool `json:"host"`
	// Named is false when the container's names could not be read; then
	// Namespace is UnknownLabel, Pod the pod UID and Container the
	// container ID. Host rows have HostLabel for all three.
	Named bool `json:"named"`
	// Clients is the number of open DRM files (distinct drm-client-id).
	Clients   int       `json:"clients"`
	Processes []Process `json:"processes"`
	// Engines by class, in the order of Classes; only classes seen.
	Engines []EngineUsage `json:"engines"`
	// Memory by region and kind.
	Memory []MemoryUsage `json:"memory,omitempty"`
	// IdleSeconds is the time since any engine of the card last did
	// work for this container (or since it was first seen).
	IdleSeconds float64 `json:"idleSeconds"`
	// Idle is true when it holds an open client and IdleSeconds reached
	// the Monitor's idle threshold.
	Idle bool `json:"idle"`
	// Claims are the DRA claims through which the container holds the
	// card, with what each was promised of it; empty without a claim
	// source (the device plugin's agent), for the host and for unnamed
	// containers.
	Claims []Claim `json:"claims,omitempty"`
}

// Process is one process holding a client.
type Process struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
}

// EngineUsage is one engine class of a container on a card.
type EngineUsage struct {
	Class string `json:"class"`
	// BusySeconds is the busy time of the class's engines for this
	// container's clients, exited clients included; it never decreases.
	// Engines with capacity N count 1/N. From drm-engine-<e>, or from
	// drm-cycles-<e> over drm-total-cycles-<e> (xe).
	BusySeconds float64 `json:"busySeconds"`
	// Busy is the busy fraction over the last interval (0..1 per engine
	// kind in the class); -1 before two scans.
	Busy float64 `json:"busy"`
	// MaxFreqSeconds is drm-cycles-<e> over drm-maxfreq-<e>: the time the
	// work would take at the engine's top frequency. Not busy time.
	MaxFreqSeconds float64 `json:"maxFreqSeconds,omitempty"`
	// HasBusy and HasMaxFreq tell which figures the driver gives.
	HasBusy    bool `json:"hasBusy"`
	HasMaxFreq bool `json:"hasMaxFreq"`
}

// MemoryUsage is the memory of one region and kind, summed over the
// container's open clients.
type MemoryUsage struct {
	Region string `json:"region"`
	Kind   string `json:"kind"`
	Bytes  uint64 `json:"bytes"`
}
