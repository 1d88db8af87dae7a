package harness

import (
	"fmt"
	"strings"
)

// Errno names of the probe results.
const (
	// EPERM: the device cgroup denied the open.
	EPERM = "EPERM"
	// ENXIO: the cgroup allowed it; no driver serves the fake number.
	ENXIO = "ENXIO"
	// EACCES: file permissions or groups denied it.
	EACCES = "EACCES"
	// ENOENT: the node does not exist in the container.
	ENOENT = "ENOENT"
	// Opened: open succeeded (only possible with a real driver).
	Opened = "OPENED"
)

// probeMarker starts each result line of the probe script.
const probeMarker = "PROBE "

// ProbeDone ends the probe script's output.
const ProbeDone = "PROBE-DONE"

// ProbeScript returns a shell snippet that opens each path read-write the
// way `exec 3<>path` does and prints one result line per path, then
// ProbeDone.
func ProbeScript(paths ...string) string {
	var b strings.Builder
	b.WriteString("echo \"INFO id: $(id)\"; echo \"INFO dev: $(ls -ln /dev/dri 2>&1 | tr '\\n' ' ')\"; ")
	for _, p := range paths {
		fmt.Fprintf(&b, `if [ ! -e %[1]q ]; then echo "PROBE %[1]s missing"; elif err=$( (exec 3<>%[1]q) 2>&1 ); then echo "PROBE %[1]s opened"; else echo "PROBE %[1]s error: $err"; fi; `, p)
	}
	b.WriteString("echo " + ProbeDone)
	return b.String()
}

// ProbeAndWait is ProbeScript followed by waiting for SIGTERM, for pods
// that must keep running.
func ProbeAndWait(paths ...string) string {
	return ProbeScript(paths...) + "; trap 'exit 0' TERM; while true; do sleep 1; done"
}

// ProbeResult is what opening one path gave.
type ProbeResult struct {
	Path string
	// Errno is EPERM, ENXIO, EACCES, ENOENT, Opened, or "" when the
	// message is not one of those.
	Errno string
	// Message is the shell's message.
	Message string
}

// ParseProbe extracts the result for path from probe output.
func ParseProbe(output, path string) (ProbeResult, error) {
	for _, line := range strings.Split(output, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), probeMarker+path+" ")
		if !ok {
			continue
		}
		r := ProbeResult{Path: path, Message: rest}
		switch rest {
		case "missing":
			r.Errno = ENOENT
		case "opened":
			r.Errno = Opened
		default:
			r.Errno = Errno(rest)
		}
		return r, nil
	}
	return ProbeResult{}, fmt.Errorf("no probe result for %s in output %q", path, output)
}

// Errno names the error in a shell's message about a failed open, or
// returns "" when it is none of EPERM, ENXIO, EACCES and ENOENT.
func Errno(message string) string {
	switch {
	case strings.Contains(message, "Operation not permitted"):
		return EPERM
	case strings.Contains(message, "No such device or address"):
		return ENXIO
	case strings.Contains(message, "Permission denied"):
		return EACCES
	case strings.Contains(message, "No such file or directory"):
		return ENOENT
	}
	return ""
}
