package cli

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/doctor"
)

// doctorHost lays out a host root with a containerd 2.x config, the
// kubelet's and containerd's sockets (unless left out) and cgroup v2.
func doctorHost(t *testing.T, leaveOut ...string) string {
	t.Helper()
	root, err := os.MkdirTemp("", "dc")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	write := func(p, body string) {
		p = filepath.Join(root, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	write("etc/containerd/config.toml", "version = 3\n")
	write("sys/fs/cgroup/cgroup.controllers", "cpu memory\n")
	write("etc/dri-cdi/config.yaml", "cdiKind: example.com/gpu\n")
	skip := map[string]bool{}
	for _, l := range leaveOut {
		skip[l] = true
	}
	for _, s := range []string{"/var/lib/kubelet/device-plugins/kubelet.sock", "/var/lib/kubelet/pod-resources/kubelet.sock", "/var/run/nri/nri.sock"} {
		if skip[s] {
			continue
		}
		p := filepath.Join(root, s)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		l, err := net.Listen("unix", p)
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
	}
	return root
}

func TestDoctor(t *testing.T) {
	root := doctorHost(t)
	r := run(t, nil, "doctor", "-host-root", root, "-o", "json")
	require.Equal(t, ExitOK, r.code, r.stderr+r.stdout)
	var rep doctor.Report
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.False(t, rep.Failed)
	require.Equal(t, doctor.DeliveryCDICRI, rep.Recommended)

	// The config's cdiKind names the spec files looked for. The config is
	// a host path, read inside the host root like every other.
	r = run(t, nil, "doctor", "-host-root", root, "-config", "/etc/dri-cdi/config.yaml")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "/var/run/cdi does not exist")
	r = run(t, nil, "doctor", "-host-root", root, "-config", filepath.Join(root, "etc/dri-cdi/config.yaml"))
	require.Equal(t, ExitError, r.code, r.stdout)
	require.Contains(t, r.stderr, filepath.Join(root, root, "etc/dri-cdi/config.yaml"))

	// A failed check is exit code 1, with the report on stdout.
	root = doctorHost(t, "/var/lib/kubelet/pod-resources/kubelet.sock")
	r = run(t, map[string]string{"DRI_CDI_HOST_ROOT": root}, "doctor")
	require.Equal(t, ExitError, r.code)
	require.Regexp(t, `(?m)^FAIL  kubelet\.pod-resources`, r.stdout)
	require.Contains(t, r.stderr, "at least one check failed")

	// In device-specs mode the NRI plugin and its PodResources socket are not needed.
	r = run(t, nil, "doctor", "-host-root", root, "-delivery", "device-specs")
	require.Regexp(t, `(?m)^WARN  kubelet\.pod-resources`, r.stdout)

	// A flag moves a path: the kubelet socket is not where we now look.
	root = doctorHost(t)
	r = run(t, nil, "doctor", "-host-root", root, "-o", "json", "--kubelet-dir", "/nowhere")
	require.Equal(t, ExitError, r.code)
	require.Contains(t, r.stdout, "/nowhere is not a directory")

	// Environment variables set flags too.
	r = run(t, map[string]string{"DRI_CDI_DELIVERY": "nri"}, "doctor", "-host-root", root, "-o", "json")
	require.Equal(t, ExitOK, r.code, r.stderr+r.stdout)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Equal(t, doctor.DeliveryNRI, rep.Delivery)

	for name, args := range map[string][]string{
		"bad output":   {"doctor", "-o", "yaml"},
		"bad delivery": {"doctor", "-delivery", "cdi"},
		"argument":     {"doctor", "now"},
		"unknown flag": {"doctor", "--bogus"},
	} {
		t.Run(name, func(t *testing.T) {
			r := run(t, nil, args...)
			require.Equal(t, ExitUsage, r.code, r.stderr)
		})
	}
}
