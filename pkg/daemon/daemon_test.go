package daemon

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/logging"
)

func TestStart(t *testing.T) {
	tests := map[string]struct {
		args   []string
		env    map[string]string
		runErr error
		code   int
		ran    bool
		addr   string   // the --addr option run is given
		stderr []string // substrings of stderr
	}{
		"flags parsed, run called":        {args: []string{"--addr=:1"}, code: ExitOK, ran: true, addr: ":1"},
		"environment fills an unset flag": {env: map[string]string{"DRI_CDI_ADDR": ":2"}, code: ExitOK, ran: true, addr: ":2"},
		"command line wins over the environment": {args: []string{"--addr=:1"}, env: map[string]string{"DRI_CDI_ADDR": ":2"},
			code: ExitOK, ran: true, addr: ":1"},
		"help":                  {args: []string{"-h"}, code: ExitOK},
		"unknown flag":          {args: []string{"--nope"}, code: ExitUsage, stderr: []string{"nope"}},
		"stray argument":        {args: []string{"extra"}, code: ExitUsage, stderr: []string{"test-daemon: unexpected arguments", `"extra"`}},
		"bad log level":         {args: []string{"--log-level=loud"}, code: ExitUsage, stderr: []string{"test-daemon:", "loud"}},
		"bad environment value": {env: map[string]string{"DRI_CDI_LOG_LEVEL": "loud"}, code: ExitUsage, stderr: []string{"test-daemon:", "loud"}},
		"run fails":             {runErr: errors.New("boom"), code: ExitFailed, ran: true, addr: ":0", stderr: []string{"test-daemon failed", "boom"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			ran := false
			code := start(tc.args, &stderr, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }, newTestFlags,
				func(ctx context.Context, o testOptions, log *logrus.Logger) error {
					ran = true
					require.NotNil(t, log)
					require.NoError(t, ctx.Err())
					require.Equal(t, tc.addr, o.addr)
					return tc.runErr
				})
			require.Equal(t, tc.code, code, stderr.String())
			require.Equal(t, tc.ran, ran)
			for _, s := range tc.stderr {
				require.Contains(t, stderr.String(), s)
			}
		})
	}
}

// testOptions and newTestFlags stand for a command's Options and
// NewFlagSet.
type testOptions struct{ addr string }

func newTestFlags(o *testOptions, log *logging.Flags) *flag.FlagSet {
	fs := flag.NewFlagSet("test-daemon", flag.ContinueOnError)
	fs.StringVar(&o.addr, "addr", ":0", "an address")
	log.Register(fs)
	return fs
}
