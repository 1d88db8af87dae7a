package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// DoctorReport is the JSON report of `dri-cdi doctor`.
type DoctorReport struct {
	Results []DoctorResult `json:"results"`
	// Delivery is the mode the doctor was told the agent runs in.
	Delivery string `json:"delivery"`
	// Recommended is the mode the doctor finds this runtime supports.
	Recommended string `json:"recommendedDelivery"`
	// Failed is true when a check failed.
	Failed bool `json:"failed"`
}

// DoctorResult is one check of the doctor.
type DoctorResult struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// Failures returns the checks that ended FAIL.
func (r *DoctorReport) Failures() []DoctorResult {
	var out []DoctorResult
	for _, c := range r.Results {
		if c.Status == "FAIL" {
			out = append(out, c)
		}
	}
	return out
}

// Doctor runs `dri-cdi doctor -o json` against the node's containerd
// config, sockets, fake DRM tree and CDI dir, as an operator would on the
// host, telling it the agent's delivery mode. It returns the report and
// the text output of a second, human-readable run.
func (n *Node) Doctor(ctx context.Context, delivery string) (*DoctorReport, string, error) {
	args := []string{"doctor",
		"--containerd-config=" + filepath.Join(n.Dir, "containerd.toml"),
		"--containerd-version=" + n.containerdVersion(ctx),
		"--cdi-dir=" + n.CDIDir,
		"--delivery=" + delivery,
		"--sysfs-root=" + n.SysfsRoot,
		"--dev-root=" + n.DevRoot,
		"--kubelet-dir=" + DevicePluginDir,
		"--plugins-registry-dir=" + n.PluginsRegistryDir(),
		"--nri-socket=" + n.NRISocket,
		"--pod-resources-socket=" + n.PodResourcesSocket,
	}
	if n.ConfigPath != "" {
		args = append(args, "--config="+n.ConfigPath)
	}
	// A failed check makes the doctor exit 1; that is a result, not an
	// error of the run.
	run := func(extra ...string) (stdout, stderr string, err error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, n.suite.Product.CLI, append(args, extra...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err = cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return "", "", fmt.Errorf("dri-cdi doctor: %w: %s", err, errb.String())
		}
		return out.String(), errb.String(), nil
	}
	jsonOut, jsonErr, err := run("-o", "json")
	if err != nil {
		return nil, "", err
	}
	var rep DoctorReport
	if err := json.Unmarshal([]byte(jsonOut), &rep); err != nil {
		return nil, "", fmt.Errorf("parse dri-cdi doctor -o json: %w: %q %q", err, jsonOut, jsonErr)
	}
	text, textErr, err := run()
	return &rep, text + textErr, err
}

func (n *Node) containerdVersion(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, n.bins().Containerd, "--version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
