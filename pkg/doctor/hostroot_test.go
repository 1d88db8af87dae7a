package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHostRootResolve(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"run/nri", "etc", "lib"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	links := map[string]string{
		"var/run":  "/run",                 // absolute, Debian and Ubuntu
		"var/run2": "../run",               // relative
		"up":       "../../../../../../..", // relative, above the root
		"passwd":   "/etc/passwd",          // absolute, to a file the test host has
		"lib/k":    "../../../lib",         // relative, climbing past the root
		"loop/a":   "b",
		"loop/b":   "a",
	}
	for link, target := range links {
		p := filepath.Join(root, link)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.Symlink(target, p))
	}
	r := newHostRoot(root)
	cases := map[string]struct {
		in, want string
		err      bool
	}{
		"plain":                          {in: "/etc/containerd/config.toml", want: "etc/containerd/config.toml"},
		"absolute symlink stays inside":  {in: "/var/run/nri/nri.sock", want: "run/nri/nri.sock"},
		"relative symlink":               {in: "/var/run2/nri/nri.sock", want: "run/nri/nri.sock"},
		"dot-dot stops at the root":      {in: "/up/etc/passwd", want: "etc/passwd"},
		"absolute target is in the root": {in: "/passwd", want: "etc/passwd"},
		"relative climb past the root":   {in: "/lib/k/x", want: "lib/x"},
		"lexical dot-dot":                {in: "/var/../../../etc", want: "etc"},
		"symlink loop":                   {in: "/loop/a/x", err: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := r.resolve(tc.in)
			if tc.err {
				require.Error(t, err)
				require.Contains(t, err.Error(), tc.in)
				return
			}
			require.NoError(t, err)
			require.Equal(t, filepath.Join(root, tc.want), got)
		})
	}

	// On the host itself the kernel resolves: paths are passed through.
	for _, dir := range []string{"", "/"} {
		got, err := newHostRoot(dir).resolve("/var/run/nri/nri.sock")
		require.NoError(t, err)
		require.Equal(t, "/var/run/nri/nri.sock", got)
	}
}

// TestCheckResolvesInsideHostRoot lays out a host whose paths go through
// symlinks, absolute and relative, and checks it from outside, as
// `kubectl debug node/... -- dri-cdi doctor --host-root /host` does. Each
// symlink points at a place that also exists outside the root with
// different content, so a doctor that followed it out of the root would
// report the wrong thing.
func TestCheckResolvesInsideHostRoot(t *testing.T) {
	for _, kind := range []string{"absolute", "relative"} {
		t.Run(kind, func(t *testing.T) {
			opts := node{config: "v3-containerd2.toml", cgroup: "v2"}.build(t)
			root := opts.Root

			// Outside the root: a config containerd would refuse. The
			// host's copy of the same path holds the valid one.
			outside := t.TempDir()
			writeFile(t, filepath.Join(outside, "config.toml"), "version = 7\n")
			raw, err := os.ReadFile(filepath.Join(root, "etc/containerd/config.toml"))
			require.NoError(t, err)
			writeFile(t, filepath.Join(root, outside, "config.toml"), string(raw))
			cfg := filepath.Join(root, "etc/containerd/config.toml")
			require.NoError(t, os.Remove(cfg))

			// /var/run -> /run, as on Debian and Ubuntu: the NRI socket
			// and the CDI dir are really under /run.
			require.NoError(t, os.Rename(filepath.Join(root, "var/run"), filepath.Join(root, "run")))

			// /var/lib/kubelet -> /data/kubelet, with the kubelet's
			// sockets there.
			require.NoError(t, os.MkdirAll(filepath.Join(root, "data"), 0o755))
			require.NoError(t, os.Rename(filepath.Join(root, "var/lib/kubelet"), filepath.Join(root, "data/kubelet")))

			if kind == "absolute" {
				require.NoError(t, os.Symlink(filepath.Join(outside, "config.toml"), cfg))
				require.NoError(t, os.Symlink("/run", filepath.Join(root, "var/run")))
				require.NoError(t, os.Symlink("/data/kubelet", filepath.Join(root, "var/lib/kubelet")))
			} else {
				// More ".." than the depth: the kernel stops at "/".
				up := strings.Repeat("../", 12)
				require.NoError(t, os.Symlink(up+strings.TrimPrefix(outside, "/")+"/config.toml", cfg))
				require.NoError(t, os.Symlink("../run", filepath.Join(root, "var/run")))
				require.NoError(t, os.Symlink("../../data/kubelet", filepath.Join(root, "var/lib/kubelet")))
			}

			rep := check(t, opts)
			got := map[string]Result{}
			for _, r := range rep.Results {
				got[r.Name] = r
			}
			for _, name := range []string{"containerd.config", "containerd.nri.socket", "containerd.cdi_spec_dirs", "kubelet.device-plugins", "kubelet.pod-resources"} {
				require.Equal(t, OK, got[name].Status, "%s: %s", name, got[name].Message)
			}
			require.Contains(t, got["containerd.config"].Message, "version 3")
			require.NotContains(t, got, "host-root")
			require.False(t, rep.Failed, "%+v", rep.Results)
			require.Equal(t, DeliveryCDICRI, rep.Recommended)
		})
	}
}

func TestCheckReportsUnresolvablePaths(t *testing.T) {
	opts := node{config: "v3-containerd2.toml", cgroup: "v2", noNRISocket: true}.build(t)
	nri := filepath.Join(opts.Root, "var/run/nri")
	require.NoError(t, os.RemoveAll(nri))
	require.NoError(t, os.Symlink("nri2", nri))
	require.NoError(t, os.Symlink("nri", filepath.Join(opts.Root, "var/run/nri2")))

	rep := check(t, opts)
	var hr, sock *Result
	for i, r := range rep.Results {
		switch r.Name {
		case "host-root":
			hr = &rep.Results[i]
		case "containerd.nri.socket":
			sock = &rep.Results[i]
		}
	}
	require.NotNil(t, hr, "a symlink loop is reported")
	require.Equal(t, Fail, hr.Status)
	require.Contains(t, hr.Message, "/var/run/nri/nri.sock")
	require.NotEmpty(t, hr.Fix)
	require.NotNil(t, sock)
	require.Equal(t, Fail, sock.Status)
	require.True(t, rep.Failed)
}

// TestK3sTemplateByConfigVersion checks that doctor names the template
// k3s reads for the config's version, and the k3s release floor.
func TestK3sTemplateByConfigVersion(t *testing.T) {
	const dir = "/var/lib/rancher/k3s/agent/etc/containerd"
	v2 := "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = true\n"
	v3 := "version = 3\n"
	cases := map[string]struct {
		config    string
		templates []string
		status    Status
		template  string // in the template message or fix
		k3s       Status
	}{
		"v3, no template":              {config: v3, status: OK, template: "create " + dir + "/config-v3.toml.tmpl", k3s: OK},
		"v3, from its template":        {config: v3, templates: []string{K3sTemplateV3}, status: OK, template: "rendered from " + dir + "/config-v3.toml.tmpl", k3s: OK},
		"v3, stale legacy template":    {config: v3, templates: []string{K3sTemplateV2}, status: Warn, template: dir + "/config-v3.toml.tmpl", k3s: OK},
		"v2, no template":              {config: v2, status: OK, template: "create " + dir + "/config.toml.tmpl", k3s: Warn},
		"v2, from its template":        {config: v2, templates: []string{K3sTemplateV2}, status: OK, template: "rendered from " + dir + "/config.toml.tmpl", k3s: Warn},
		"v2, v3 template on old k3s":   {config: v2, templates: []string{K3sTemplateV3}, status: Warn, template: "reads only " + dir + "/config.toml.tmpl", k3s: Warn},
		"v2, both templates (old k3s)": {config: v2, templates: []string{K3sTemplateV2, K3sTemplateV3}, status: OK, template: "rendered from " + dir + "/config.toml.tmpl", k3s: Warn},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opts := node{cgroup: "v2"}.build(t)
			writeFile(t, filepath.Join(opts.Root, dir, "config.toml"), tc.config)
			for _, tmpl := range tc.templates {
				writeFile(t, filepath.Join(opts.Root, dir, tmpl), "{{ template \"base\" . }}\n")
			}
			rep := check(t, opts)
			got := map[string]Result{}
			for _, r := range rep.Results {
				got[r.Name] = r
			}
			tr := got["containerd.template"]
			require.Equal(t, tc.status, tr.Status, tr.Message)
			require.Contains(t, tr.Message+" "+tr.Fix, tc.template)
			kr := got["k3s"]
			require.Equal(t, tc.k3s, kr.Status, kr.Message)
			for _, floor := range K3sContainerd2Releases {
				require.Contains(t, kr.Message, floor)
			}
			if tc.k3s == Warn {
				require.Contains(t, kr.Message, "containerd 1.7")
				require.Contains(t, kr.Fix, "upgrade k3s")
			}
		})
	}
}
