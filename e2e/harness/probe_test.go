package harness

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseProbe(t *testing.T) {
	for name, tc := range map[string]struct {
		out, want string
		err       bool
	}{
		"eperm":           {out: "INFO id\nPROBE /dev/dri/renderD128 error: sh: can't open '/dev/dri/renderD128': Operation not permitted\nPROBE-DONE\n", want: EPERM},
		"enxio":           {out: "PROBE /dev/dri/renderD128 error: sh: can't open '/dev/dri/renderD128': No such device or address\n", want: ENXIO},
		"eacces":          {out: "PROBE /dev/dri/renderD128 error: sh: can't open '/dev/dri/renderD128': Permission denied\n", want: EACCES},
		"missing":         {out: "PROBE /dev/dri/renderD128 missing\n", want: ENOENT},
		"opened":          {out: "PROBE /dev/dri/renderD128 opened\n", want: Opened},
		"unknown":         {out: "PROBE /dev/dri/renderD128 error: sh: something else\n", want: ""},
		"other path only": {out: "PROBE /dev/dri/renderD129 missing\n", err: true},
		"empty":           {out: "", err: true},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := ParseProbe(tc.out, "/dev/dri/renderD128")
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, r.Errno)
		})
	}
}

// TestProbeScriptRuns runs the probe with the host's sh against paths
// whose outcome does not depend on privileges.
func TestProbeScriptRuns(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	out, err := exec.Command(sh, "-c", ProbeScript("/nonexistent/renderD128", "/dev/null")).CombinedOutput()
	require.NoError(t, err, string(out))
	r, err := ParseProbe(string(out), "/nonexistent/renderD128")
	require.NoError(t, err)
	require.Equal(t, ENOENT, r.Errno)
	r, err = ParseProbe(string(out), "/dev/null")
	require.NoError(t, err)
	require.Equal(t, Opened, r.Errno)
	require.Contains(t, string(out), ProbeDone)
}
