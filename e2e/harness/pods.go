package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
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

// ---- kubelet read-only API ----

// PodStatus is the part of a pod's status the scenarios read.
type PodStatus struct {
	Phase      string            `json:"phase"`
	Reason     string            `json:"reason"`
	Message    string            `json:"message"`
	Containers []ContainerStatus `json:"containerStatuses"`
}

// ContainerStatus is the part of a container's status the scenarios read.
type ContainerStatus struct {
	Name         string `json:"name"`
	RestartCount int    `json:"restartCount"`
	ContainerID  string `json:"containerID"`
	State        struct {
		Waiting *struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"waiting"`
		Running    *struct{} `json:"running"`
		Terminated *struct {
			ExitCode int    `json:"exitCode"`
			Reason   string `json:"reason"`
			Message  string `json:"message"`
		} `json:"terminated"`
	} `json:"state"`
}

// WaitingWith is a WaitPod condition: a container of the pod waits (to
// be created or restarted) with a message that contains substr, as a
// container whose device the runtime or dri-cdi refused does.
func WaitingWith(substr string) func(PodStatus) bool {
	return func(s PodStatus) bool {
		for _, c := range s.Containers {
			if c.State.Waiting != nil && strings.Contains(c.State.Waiting.Message, substr) {
				return true
			}
		}
		return false
	}
}

// Describe is a one-line summary for logs and failures.
func (s PodStatus) Describe() string {
	parts := []string{"phase=" + s.Phase}
	if s.Reason != "" || s.Message != "" {
		parts = append(parts, fmt.Sprintf("reason=%s message=%q", s.Reason, s.Message))
	}
	for _, c := range s.Containers {
		switch {
		case c.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting %s: %q", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message))
		case c.State.Running != nil:
			parts = append(parts, c.Name+" running")
		case c.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("%s terminated %s (exit %d): %q", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode, c.State.Terminated.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// Pods returns the kubelet's pods by full name, from its read-only port.
func (n *Node) Pods(ctx context.Context) (map[string]PodStatus, error) {
	body, err := n.readOnly(ctx, "/pods")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Status PodStatus `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("parse kubelet /pods: %w", err)
	}
	out := map[string]PodStatus{}
	for _, it := range list.Items {
		out[it.Metadata.Name] = it.Status
	}
	return out, nil
}

// WaitPod waits until the pod's status satisfies cond.
func (n *Node) WaitPod(ctx context.Context, name string, timeout time.Duration, cond func(PodStatus) bool) (PodStatus, error) {
	full := name + "-" + NodeName
	var last PodStatus
	err := poll(ctx, timeout, func() (bool, error) {
		pods, err := n.Pods(ctx)
		if err != nil {
			return false, nil
		}
		st, ok := pods[full]
		if !ok {
			return false, nil
		}
		last = st
		return cond(st), nil
	})
	if err != nil {
		return last, fmt.Errorf("pod %s: %w (last status: %s)", name, err, last.Describe())
	}
	return last, nil
}

func (n *Node) readOnly(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", kubeletReadOnlyPort, path), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kubelet %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("kubelet %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kubelet %s: %s", path, resp.Status)
	}
	return body, nil
}

// KubeletMetric sums the samples of a kubelet metric whose labels contain
// every given label="value" pair.
func (n *Node) KubeletMetric(ctx context.Context, name string, labels ...string) (float64, error) {
	body, err := n.readOnly(ctx, "/metrics")
	if err != nil {
		return 0, err
	}
	var sum float64
	found := false
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(line, l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		var v float64
		if _, err := fmt.Sscan(f[len(f)-1], &v); err == nil {
			sum += v
			found = true
		}
	}
	if !found {
		return 0, nil
	}
	return sum, nil
}

// ---- CRI ----

// Crictl runs crictl against the node's containerd and returns its
// standard output; its standard error (warnings) goes into errors only.
func (n *Node) Crictl(ctx context.Context, args ...string) (string, error) {
	stdout, _, err := n.crictl(ctx, args...)
	return stdout, err
}

func (n *Node) crictl(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	ep := "unix://" + n.ContainerdSocket
	full := append([]string{"--runtime-endpoint", ep, "--image-endpoint", ep, "--timeout", "20s"}, args...)
	cmd := exec.CommandContext(ctx, n.suite.Tools.Crictl, full...)
	cmd.Env = append(os.Environ(), "CRI_CONFIG_FILE=/dev/null")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), errb.String(), fmt.Errorf("crictl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), errb.String(), nil
}

// Ctr runs ctr against the node's containerd.
func (n *Node) Ctr(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.bins().Ctr, append([]string{"--address", n.ContainerdSocket}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

func (n *Node) sandboxIDs(ctx context.Context) ([]string, error) {
	out, err := n.Crictl(ctx, "pods", "-q")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// Container is one CRI container of a pod.
type Container struct {
	ID      string
	Attempt int
	State   string
	Created int64
	PodID   string
	Name    string
	PodName string
}

// PodContainer returns the newest container of the pod's main container.
func (n *Node) PodContainer(ctx context.Context, podName string) (*Container, error) {
	return n.NamedContainer(ctx, podName, ContainerName)
}

// ErrNoContainer means the pod has no container (yet).
var ErrNoContainer = errors.New("no container")

// Logs returns the container's output, stdout then stderr.
func (n *Node) Logs(ctx context.Context, containerID string) (string, error) {
	stdout, stderr, err := n.crictl(ctx, "logs", containerID)
	return stdout + stderr, err
}

// WaitOutput waits until the pod's main container printed a line
// containing marker, and returns its whole output.
func (n *Node) WaitOutput(ctx context.Context, podName, marker string, timeout time.Duration) (string, error) {
	return n.WaitContainerOutput(ctx, podName, ContainerName, marker, timeout)
}

// Exec runs a command in a running container and returns its output,
// stdout then stderr.
func (n *Node) Exec(ctx context.Context, containerID string, cmd ...string) (string, error) {
	stdout, stderr, err := n.crictl(ctx, append([]string{"exec", containerID}, cmd...)...)
	return stdout + stderr, err
}

// ContainerSpec is the part of a container's OCI spec and CRI config the
// scenarios check.
type ContainerSpec struct {
	// CDIDevices are the CDI names the kubelet passed in the CRI config.
	CDIDevices []string
	// Devices are the OCI spec's linux.devices.
	Devices []OCIDevice
	// Rules are the OCI spec's linux.resources.devices.
	Rules []OCIDeviceRule
	// Annotations are the OCI spec's annotations.
	Annotations map[string]string
	// Raw is crictl inspect's output.
	Raw string
}

// OCIDevice is one entry of linux.devices.
type OCIDevice struct {
	Path  string `json:"path"`
	Type  string `json:"type"`
	Major int64  `json:"major"`
	Minor int64  `json:"minor"`
	UID   *int64 `json:"uid"`
	GID   *int64 `json:"gid"`
}

// OCIDeviceRule is one entry of linux.resources.devices.
type OCIDeviceRule struct {
	Allow  bool   `json:"allow"`
	Type   string `json:"type"`
	Major  *int64 `json:"major"`
	Minor  *int64 `json:"minor"`
	Access string `json:"access"`
}

// Inspect reads a container's spec through crictl inspect.
func (n *Node) Inspect(ctx context.Context, containerID string) (*ContainerSpec, error) {
	out, err := n.Crictl(ctx, "inspect", "-o", "json", containerID)
	if err != nil {
		return nil, err
	}
	var raw struct {
		Info struct {
			Config struct {
				CDIDevices []struct {
					Name string `json:"name"`
				} `json:"CDI_devices"`
			} `json:"config"`
			RuntimeSpec struct {
				Annotations map[string]string `json:"annotations"`
				Linux       struct {
					Devices   []OCIDevice `json:"devices"`
					Resources struct {
						Devices []OCIDeviceRule `json:"devices"`
					} `json:"resources"`
				} `json:"linux"`
			} `json:"runtimeSpec"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		return nil, fmt.Errorf("parse crictl inspect %s: %w", containerID, err)
	}
	s := &ContainerSpec{
		Devices:     raw.Info.RuntimeSpec.Linux.Devices,
		Rules:       raw.Info.RuntimeSpec.Linux.Resources.Devices,
		Annotations: raw.Info.RuntimeSpec.Annotations,
		Raw:         out,
	}
	for _, d := range raw.Info.Config.CDIDevices {
		s.CDIDevices = append(s.CDIDevices, d.Name)
	}
	return s, nil
}

// DevicesAt returns the spec's linux.devices entries with this path.
func (s *ContainerSpec) DevicesAt(path string) []OCIDevice {
	var out []OCIDevice
	for _, d := range s.Devices {
		if d.Path == path {
			out = append(out, d)
		}
	}
	return out
}

// AllowRules returns the allow rules for a char device major:minor.
func (s *ContainerSpec) AllowRules(major, minor int64) []OCIDeviceRule {
	var out []OCIDeviceRule
	for _, r := range s.Rules {
		if r.Allow && r.Type == "c" && r.Major != nil && *r.Major == major && r.Minor != nil && *r.Minor == minor {
			out = append(out, r)
		}
	}
	return out
}

// ManifestYAML returns the static pod manifest of p as YAML, for people.
func (n *Node) ManifestYAML(p PodSpec) (string, error) {
	data, err := n.manifest(p)
	if err != nil {
		return "", err
	}
	y, err := yaml.JSONToYAML(data)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(y), "\n"), nil
}

// StopContainer stops a container through CRI with no grace period, as
// a crash of its process would end it; the kubelet then restarts it
// when the pod's restartPolicy says so.
func (n *Node) StopContainer(ctx context.Context, id string) error {
	_, err := n.Crictl(ctx, "stop", "--timeout", "0", id)
	return err
}

// Containers returns every container of the pod's main container, all
// attempts, newest first.
func (n *Node) Containers(ctx context.Context, podName string) ([]Container, error) {
	full := podName + "-" + NodeName
	out, err := n.Crictl(ctx, "ps", "-a", "-q", "--label", "io.kubernetes.pod.name="+full, "--label", "io.kubernetes.container.name="+ContainerName)
	if err != nil {
		return nil, err
	}
	var cs []Container
	for _, id := range strings.Fields(out) {
		cs = append(cs, Container{ID: id, PodName: full})
	}
	return cs, nil
}
