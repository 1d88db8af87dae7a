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
		addr   string   // the --addr flag run sees
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
		"run fails":             {runErr: errors.New("boom"), code: ExitFailed, ran: true, stderr: []string{"test-daemon failed", "boom"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("test-daemon", flag.ContinueOnError)
			addr := fs.String("addr", ":0", "an address")
			var logFlags logging.Flags
			logFlags.Register(fs)
			var stderr bytes.Buffer
			ran := false
			code := start(tc.args, fs, &logFlags, &stderr, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok },
				func(ctx context.Context, log *logrus.Logger) error {
					ran = true
					require.NotNil(t, log)
					require.NoError(t, ctx.Err())
					return tc.runErr
				})
			require.Equal(t, tc.code, code, stderr.String())
			require.Equal(t, tc.ran, ran)
			if tc.addr != "" {
				require.Equal(t, tc.addr, *addr)
			}
			for _, s := range tc.stderr {
				require.Contains(t, stderr.String(), s)
			}
		})
	}
}
