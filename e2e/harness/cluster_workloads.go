package harness

import (
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// MediaServerMarker starts the media server's report of what it found.
const MediaServerMarker = "MEDIA"

// mediaServerScript is the seed's media-server shape (Plex and the
// linuxserver.io images do this in their init): start as root, find the
// render node's group, join the unprivileged user to it, then drop to
// uid 1000 with su and open the node as that user. It prints
// "MEDIA node <path> gid <gid>", then the probe lines as uid 1000.
const mediaServerScript = `node=$(ls /dev/dri/renderD* 2>/dev/null | head -n 1)
if [ -z "$node" ]; then echo "MEDIA no render node"; ls -la /dev /dev/dri; exec sleep 3600; fi
gid=$(stat -c %g "$node")
echo "MEDIA node $node gid $gid"
echo "render$gid:x:$gid:user" >> /etc/group
exec su -s /bin/sh user -c "NODE=$node; $PROBE"
`

// MediaServer is a Deployment of the seed's media-server shape: one
// replica, strategy Recreate (a second pod could never get the one GPU),
// running as root until it drops to uid 1000, requesting count of
// resource.
func MediaServer(name, resource string, count int) string {
	return mediaDeployment(name, mediaPodSpec(resource, count))
}

// MovableMediaServer is MediaServer whose pod tolerates a NotReady or
// unreachable node for tolerate only (the API server's default is 300s),
// so that the taint manager evicts it from a failed node within a
// scenario's time and its Deployment makes a replacement elsewhere.
func MovableMediaServer(name, resource string, count int, tolerate time.Duration) string {
	spec := mediaPodSpec(resource, count)
	var tolerations []any
	for _, key := range []string{"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"} {
		tolerations = append(tolerations, map[string]any{
			"key": key, "operator": "Exists", "effect": "NoExecute",
			"tolerationSeconds": int64(tolerate / time.Second),
		})
	}
	spec["tolerations"] = tolerations
	return mediaDeployment(name, spec)
}

// mediaDeployment is the media server's Deployment with pod spec spec.
func mediaDeployment(name string, spec map[string]any) string {
	d := map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   map[string]any{"name": name, "namespace": "default", "labels": map[string]any{"app": name}},
		"spec": map[string]any{
			"replicas": 1,
			"strategy": map[string]any{"type": "Recreate"},
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec":     spec,
			},
		},
	}
	out, _ := yaml.Marshal(d)
	return string(out)
}

func mediaPodSpec(resource string, count int) map[string]any {
	return map[string]any{
		"automountServiceAccountToken":  false,
		"enableServiceLinks":            false,
		"terminationGracePeriodSeconds": 2,
		"containers": []any{map[string]any{
			"name":            "server",
			"image":           BusyboxImage,
			"imagePullPolicy": "Never",
			"command":         []any{"/bin/sh", "-c", mediaServerScript},
			"env":             []any{map[string]any{"name": "PROBE", "value": ProbeAndWait("$NODE")}},
			"securityContext": map[string]any{"runAsUser": 0, "runAsGroup": 0},
			"resources": map[string]any{
				"limits": map[string]any{resource: fmt.Sprint(count)},
			},
		}},
	}
}

// GPUPod is a bare Pod of the media-server shape requesting count of
// resource.
func GPUPod(name, resource string, count int) string {
	p := map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"name": name, "namespace": "default", "labels": map[string]any{"app": name}},
		"spec":       mediaPodSpec(resource, count),
	}
	out, _ := yaml.Marshal(p)
	return string(out)
}

// MediaReport is what the media server printed.
type MediaReport struct {
	// Node is the render node it found, GID its group inside the pod.
	Node, GID string
	// ID is `id` as the dropped user; Probe the open's result.
	ID    string
	Probe ProbeResult
}

// ParseMedia reads the media server's output.
func ParseMedia(out string) (*MediaReport, error) {
	r := &MediaReport{}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if rest, ok := strings.CutPrefix(l, MediaServerMarker+" node "); ok {
			r.Node, r.GID, _ = strings.Cut(rest, " gid ")
		}
		if rest, ok := strings.CutPrefix(l, "INFO id: "); ok {
			r.ID = rest
		}
	}
	if r.Node == "" {
		return nil, fmt.Errorf("media server found no render node: %q", out)
	}
	p, err := ParseProbe(out, r.Node)
	if err != nil {
		return nil, err
	}
	r.Probe = p
	return r, nil
}
