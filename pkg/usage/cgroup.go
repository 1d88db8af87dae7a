package usage

import (
	"strings"
)

// Owner is the Kubernetes container a process runs in, as its cgroup
// path names it. The zero Owner is the host: a process outside any pod.
type Owner struct {
	// PodUID is the pod's UID with dashes, as the API server spells it.
	PodUID string `json:"podUID,omitempty"`
	// ContainerID is the runtime's container ID (64 hex digits for
	// containerd); empty for a process in the pod's own cgroup.
	ContainerID string `json:"containerID,omitempty"`
}

// Host reports whether the process runs outside any pod.
func (o Owner) Host() bool { return o.PodUID == "" }

// ParseCgroup reads the text of /proc/<pid>/cgroup and returns the pod and
// container it names. It understands the kubelet's layouts under both
// cgroup drivers, on cgroup v1 (one line per hierarchy) and v2 (the
// "0::" line):
//
//	cgroupfs: /kubepods/burstable/pod<uid>/<container id>
//	systemd:  /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<container id>.scope
//
// and paths seen from another cgroup namespace, which start with "/.."
// components. A text that names no pod is the host's.
func ParseCgroup(text string) Owner {
	var best Owner
	for line := range strings.Lines(text) {
		// hierarchy-ID:controller-list:path; the path may hold colons.
		_, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		_, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		o := ownerOfPath(strings.TrimSpace(path))
		if o.PodUID == "" {
			continue
		}
		if o.ContainerID != "" {
			return o
		}
		best = o
	}
	return best
}

// ownerOfPath finds the pod segment of a cgroup path and the container
// segment right below it.
func ownerOfPath(path string) Owner {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		uid, ok := podSegment(s)
		if !ok {
			continue
		}
		o := Owner{PodUID: uid}
		if i+1 < len(segs) {
			o.ContainerID = containerSegment(segs[i+1])
		}
		return o
	}
	return Owner{}
}

// podSegment recognizes "pod<uid>" (cgroupfs) and
// "kubepods[-<qos>]-pod<uid_with_underscores>.slice" (systemd).
func podSegment(s string) (string, bool) {
	if rest, ok := strings.CutSuffix(s, ".slice"); ok {
		i := strings.LastIndex(rest, "-pod")
		if i < 0 || !strings.HasPrefix(rest, "kubepods") {
			return "", false
		}
		uid := strings.ReplaceAll(rest[i+len("-pod"):], "_", "-")
		return uid, validUID(uid)
	}
	uid, ok := strings.CutPrefix(s, "pod")
	return uid, ok && validUID(uid)
}

// containerSegment returns the container ID of a segment below a pod:
// "<id>" (cgroupfs) or "<runtime>-<id>.scope" (systemd: cri-containerd,
// crio, docker), else "".
func containerSegment(s string) string {
	if rest, ok := strings.CutSuffix(s, ".scope"); ok {
		i := strings.LastIndex(rest, "-")
		if i < 0 {
			return ""
		}
		s = rest[i+1:]
	}
	if !validContainerID(s) {
		return ""
	}
	return s
}

// validUID accepts a UUID-shaped pod UID (hex and dashes, 36 bytes), or
// the hash-shaped UIDs of static pods (32 hex digits).
func validUID(s string) bool {
	if len(s) != 36 && len(s) != 32 {
		return false
	}
	for _, c := range s {
		if !isHex(c) && c != '-' {
			return false
		}
	}
	return true
}

// validContainerID accepts 12 to 128 hex digits.
func validContainerID(s string) bool {
	if len(s) < 12 || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !isHex(c) {
			return false
		}
	}
	return true
}

func isHex(c rune) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')
}
