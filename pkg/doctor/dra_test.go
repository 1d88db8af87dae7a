package doctor

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckDRAOneMode lays out the kubelet's device-plugins and
// plugins_registry dirs as a node running the device plugin, DRA, both,
// or neither leaves them, and checks that only both fails, naming both.
func TestCheckDRAOneMode(t *testing.T) {
	const (
		agentSock = "dri-cdi-dri-cdi.dev_i915-a1b2c3.sock"
		draSock   = "dri-cdi.dev-reg.sock"
		// the kubelet plugin helper's rolling-update name (hashed pod UID form)
		draRolling = "dri-cdi.dev-q83vEjRWeJA-reg.sock"
	)
	cases := map[string]struct {
		deviceplugins, registry []string // sockets in each dir
		files                   []string // plain files in device-plugins (not sockets)
		want                    Status
		wantIn                  []string
	}{
		"neither": {want: OK, wantIn: []string{"neither"}},
		"device plugin only": {
			deviceplugins: []string{agentSock}, want: OK, wantIn: []string{agentSock, "no DRA driver"},
		},
		"DRA only, another driver's device plugin next to it": {
			deviceplugins: []string{"intel-gpu.sock"}, registry: []string{draSock, "gpu.intel.com-reg.sock"},
			want: OK, wantIn: []string{draSock, "no dri-cdi device plugin"},
		},
		"both: fails naming both": {
			deviceplugins: []string{agentSock}, registry: []string{draSock},
			want:   Fail,
			wantIn: []string{"/var/lib/kubelet/device-plugins/" + agentSock, "/var/lib/kubelet/plugins_registry/" + draSock, "dri-cdi.dev/mode=dra"},
		},
		"both, DRA with rolling update socket": {
			deviceplugins: []string{agentSock}, registry: []string{draRolling},
			want: Fail, wantIn: []string{agentSock, draRolling},
		},
		"a stale file that is no socket is not a registration": {
			files: []string{agentSock}, registry: []string{draSock},
			want: OK, wantIn: []string{draSock},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opts := node{cgroup: "v2"}.build(t)
			listenIn := func(dir string, names []string) {
				for _, n := range names {
					p := filepath.Join(opts.Root, dir, n)
					require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
					l, err := net.Listen("unix", p)
					require.NoError(t, err)
					t.Cleanup(func() { l.Close() })
				}
			}
			listenIn(opts.KubeletDir, tc.deviceplugins)
			listenIn(opts.PluginsRegistryDir, tc.registry)
			for _, f := range tc.files {
				writeFile(t, filepath.Join(opts.Root, opts.KubeletDir, f), "")
			}
			rep, err := Check(context.Background(), opts)
			require.NoError(t, err)
			var got *Result
			for i := range rep.Results {
				if rep.Results[i].Name == "dra.one-mode" {
					got = &rep.Results[i]
				}
			}
			require.NotNil(t, got, "no dra.one-mode check in %+v", rep.Results)
			require.Equal(t, tc.want, got.Status, got.Message)
			for _, s := range tc.wantIn {
				require.Contains(t, got.Message+" "+got.Fix, s)
			}
			if tc.want == Fail {
				require.True(t, rep.Failed)
			}
		})
	}
}
