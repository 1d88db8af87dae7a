package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

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
	argv := n.inNetwork(append([]string{n.suite.Tools.Crictl}, full...)...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
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
	// Pid is the host pid of the container's process, 0 when it does not
	// run.
	Pid int
	// Created and Started are when the runtime created and started the
	// container (zero when not yet).
	Created, Started time.Time
}

// crictlTime is a time in crictl inspect's status: RFC 3339, or
// nanoseconds since the epoch (as a number or a string), 0 for none.
type crictlTime time.Time

func (t *crictlTime) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "0" || s == "null" {
		return nil
	}
	if v, err := time.Parse(time.RFC3339Nano, s); err == nil {
		*t = crictlTime(v)
		return nil
	}
	ns, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("crictl time %s: %w", b, err)
	}
	if ns > 0 {
		*t = crictlTime(time.Unix(0, ns))
	}
	return nil
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
		Status struct {
			CreatedAt crictlTime `json:"createdAt"`
			StartedAt crictlTime `json:"startedAt"`
		} `json:"status"`
		Info struct {
			Pid    int `json:"pid"`
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
		Pid:         raw.Info.Pid,
		Created:     time.Time(raw.Status.CreatedAt),
		Started:     time.Time(raw.Status.StartedAt),
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
