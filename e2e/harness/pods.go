package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ContainerName is the name of the single container of harness pods.
const ContainerName = "main"

// PodSpec describes a static pod with one busybox container.
type PodSpec struct {
	// Name of the pod; the kubelet runs it as Name + "-" + NodeName.
	Name string
	// Script is run by /bin/sh -c.
	Script string
	// RunAsUser and RunAsGroup set the container's user when not nil.
	RunAsUser  *int64
	RunAsGroup *int64
	// SupplementalGroups of the pod.
	SupplementalGroups []int64
	// Resources are extended resources requested (as limits).
	Resources map[string]int64
	// HostPathDRI mounts the node's fake /dev/dri at /dev/dri.
	HostPathDRI bool
	// Annotations of the pod.
	Annotations map[string]string
	// RestartPolicy of the pod; "" is Never.
	RestartPolicy string
}

// FullName is the name the kubelet gives the static pod.
func (p PodSpec) FullName() string { return p.Name + "-" + NodeName }

func (n *Node) manifest(p PodSpec) ([]byte, error) {
	ctr := map[string]any{
		"name":            ContainerName,
		"image":           BusyboxImage,
		"imagePullPolicy": "Never",
		"command":         []string{"/bin/sh", "-c", p.Script},
	}
	sc := map[string]any{"allowPrivilegeEscalation": false}
	if p.RunAsUser != nil {
		sc["runAsUser"] = *p.RunAsUser
	}
	if p.RunAsGroup != nil {
		sc["runAsGroup"] = *p.RunAsGroup
	}
	ctr["securityContext"] = sc
	if len(p.Resources) > 0 {
		ctr["resources"] = resourceLimits(p.Resources)
	}
	restart := p.RestartPolicy
	if restart == "" {
		restart = "Never"
	}
	spec := map[string]any{
		"hostNetwork":                   true,
		"restartPolicy":                 restart,
		"terminationGracePeriodSeconds": 2,
		"containers":                    []any{ctr},
	}
	if len(p.SupplementalGroups) > 0 {
		spec["securityContext"] = map[string]any{"supplementalGroups": p.SupplementalGroups}
	}
	if p.HostPathDRI {
		ctr["volumeMounts"] = []any{map[string]any{"name": "dri", "mountPath": "/dev/dri"}}
		spec["volumes"] = []any{map[string]any{"name": "dri", "hostPath": map[string]any{"path": filepath.Join(n.DevRoot, "dri"), "type": "Directory"}}}
	}
	meta := map[string]any{"name": p.Name, "namespace": "default"}
	if len(p.Annotations) > 0 {
		meta["annotations"] = p.Annotations
	}
	return json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}, "", "  ")
}

// CreatePod drops the pod's manifest into the static pod directory,
// atomically (the kubelet would start a half-written file). When the pod
// requests resources, it first waits until the kubelet reports them
// allocatable: a static pod admitted before its resource is registered
// fails for good.
func (n *Node) CreatePod(ctx context.Context, p PodSpec) error {
	data, err := n.manifest(p)
	if err != nil {
		return err
	}
	return n.dropManifest(ctx, p.Name, p.Resources, data)
}

// resourceLimits is a container's resources stanza that asks for the
// extended resources in need as limits (requests default to limits).
func resourceLimits(need map[string]int64) map[string]any {
	limits := map[string]string{}
	for r, q := range need {
		limits[r] = fmt.Sprint(q)
	}
	return map[string]any{"limits": limits}
}

// dropManifest waits until the node offers need (resource name to
// count), then writes the static pod manifest data for pod name through
// a temporary file and a rename, so the kubelet never reads half of it.
func (n *Node) dropManifest(ctx context.Context, name string, need map[string]int64, data []byte) error {
	for r, q := range need {
		if _, err := n.WaitAllocatable(ctx, r, int(q), 90*time.Second); err != nil {
			return fmt.Errorf("pod %s: %w", name, err)
		}
	}
	tmp := filepath.Join(n.ManifestDir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(n.ManifestDir, name+".json")); err != nil {
		return err
	}
	n.log.Logf("pod %s: manifest dropped", name)
	return nil
}

// DeletePod removes the pod's manifest, waits until the kubelet stopped
// its sandbox, and removes the sandbox.
func (n *Node) DeletePod(ctx context.Context, name string) error {
	if err := os.Remove(filepath.Join(n.ManifestDir, name+".json")); err != nil {
		return err
	}
	full := "^" + name + "-" + NodeName + "$"
	err := poll(ctx, 60*time.Second, func() (bool, error) {
		out, err := n.Crictl(ctx, "pods", "-q", "--state", "ready", "--name", full)
		return err == nil && strings.TrimSpace(out) == "", nil
	})
	if err != nil {
		return fmt.Errorf("pod %s: still running: %w", name, err)
	}
	out, err := n.Crictl(ctx, "pods", "-q", "--name", full)
	if err != nil {
		return err
	}
	for _, id := range strings.Fields(out) {
		// The kubelet may be removing the pod's containers at the same
		// time ("already in removing state"): retry until the sandbox is
		// gone.
		var rmErr error
		err := poll(ctx, 30*time.Second, func() (bool, error) {
			if _, rmErr = n.Crictl(ctx, "rmp", "-f", id); rmErr == nil {
				return true, nil
			}
			left, err := n.Crictl(ctx, "pods", "-q", "--id", id)
			return err == nil && strings.TrimSpace(left) == "", nil
		})
		if err != nil {
			return fmt.Errorf("pod %s: remove sandbox %s: %w (last error: %v)", name, id, err, rmErr)
		}
	}
	return nil
}
