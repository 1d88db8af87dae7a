package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/version"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// result is what one in-process run of dri-cdi produced.
type result struct {
	stdout, stderr string
	code           int
}

// run runs dri-cdi with args and the given environment variables.
func run(t *testing.T, environ map[string]string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, Env{
		Stdout: &out, Stderr: &errOut,
		LookupEnv: func(k string) (string, bool) { v, ok := environ[k]; return v, ok },
	})
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}

// golden compares got with testdata/<name>.golden, after replacing each
// old string of replace with its new one, and rewrites it with -update.
func golden(t *testing.T, name, got string, replace ...string) {
	t.Helper()
	got = strings.NewReplacer(replace...).Replace(got)
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run go test ./pkg/cli -update")
	require.Equal(t, string(want), got, "output differs from %s", path)
}

func TestUsage(t *testing.T) {
	cases := map[string]struct {
		args    []string
		env     map[string]string
		code    int
		stdout  []string
		stderr  []string
		noStout bool
	}{
		"no command":             {args: nil, code: ExitUsage, stderr: []string{"dri-cdi: missing command", "Commands:", "discover", "version"}, noStout: true},
		"help":                   {args: []string{"help"}, code: ExitOK, stdout: []string{"Usage: dri-cdi [global flags] <command>", "  discover ", "  cdi ", "  version ", "  help "}},
		"-h":                     {args: []string{"-h"}, code: ExitOK, stdout: []string{"Usage: dri-cdi ", "-log-format", "DRI_CDI_LOG_LEVEL"}},
		"help discover":          {args: []string{"help", "discover"}, code: ExitOK, stdout: []string{"Usage: dri-cdi discover [flags]", "-sysfs-root", "DRI_CDI_SYSFS_ROOT", "-o string", "short for -output"}},
		"discover -h":            {args: []string{"discover", "-h"}, code: ExitOK, stdout: []string{"Usage: dri-cdi discover [flags]", "DRI_CDI_DEV_ROOT", "DRI_CDI_OUTPUT"}},
		"help cdi":               {args: []string{"help", "cdi"}, code: ExitOK, stdout: []string{"Usage: dri-cdi cdi <command>", "  generate ", "  list ", "  validate "}},
		"cdi -h":                 {args: []string{"cdi", "-h"}, code: ExitOK, stdout: []string{"Usage: dri-cdi cdi <command>"}},
		"help cdi generate":      {args: []string{"help", "cdi", "generate"}, code: ExitOK, stdout: []string{"Usage: dri-cdi cdi generate", "DRI_CDI_OUTPUT_DIR", "DRI_CDI_KIND", "DRI_CDI_CONFIG", "DRI_CDI_INCLUDE_DISPLAY_ONLY"}},
		"cdi list -h":            {args: []string{"cdi", "list", "-h"}, code: ExitOK, stdout: []string{"Usage: dri-cdi cdi list", "DRI_CDI_SPEC_DIR", `(default /etc/cdi:/var/run/cdi)`}},
		"cdi validate --help":    {args: []string{"cdi", "validate", "--help"}, code: ExitOK, stdout: []string{"Usage: dri-cdi cdi validate"}},
		"cdi help validate":      {args: []string{"cdi", "help", "validate"}, code: ExitOK, stdout: []string{"Usage: dri-cdi cdi validate"}},
		"version -h":             {args: []string{"version", "-h"}, code: ExitOK, stdout: []string{"Usage: dri-cdi version"}},
		"unknown command":        {args: []string{"frobnicate"}, code: ExitUsage, stderr: []string{`unknown command "frobnicate" for "dri-cdi"`, "Commands:"}, noStout: true},
		"help unknown":           {args: []string{"help", "frobnicate"}, code: ExitUsage, stderr: []string{`unknown command "frobnicate"`}},
		"cdi without command":    {args: []string{"cdi"}, code: ExitUsage, stderr: []string{"missing command", "Usage: dri-cdi cdi <command>"}},
		"unknown cdi command":    {args: []string{"cdi", "devices"}, code: ExitUsage, stderr: []string{`unknown command "devices" for "dri-cdi cdi"`}},
		"unknown flag":           {args: []string{"discover", "--bogus"}, code: ExitUsage, stderr: []string{"flag provided but not defined: -bogus", "Usage: dri-cdi discover"}},
		"bad output":             {args: []string{"discover", "-o", "xml"}, code: ExitUsage, stderr: []string{`invalid value "xml" for -output: want table, json, yaml`}},
		"bad output from env":    {args: []string{"cdi", "list"}, env: map[string]string{"DRI_CDI_OUTPUT": "xml"}, code: ExitUsage, stderr: []string{`invalid value "xml" for -output: want text, json`}},
		"stray argument":         {args: []string{"discover", "extra"}, code: ExitUsage, stderr: []string{`unexpected argument "extra"`}},
		"bad log format":         {args: []string{"--log-format", "xml", "version"}, code: ExitUsage, stderr: []string{`invalid log format "xml"`}},
		"bad log level from env": {args: []string{"version"}, env: map[string]string{"DRI_CDI_LOG_LEVEL": "loud"}, code: ExitUsage, stderr: []string{`invalid log level "loud"`}},
		"bad bool from env":      {args: []string{"cdi", "generate"}, env: map[string]string{"DRI_CDI_INCLUDE_DISPLAY_ONLY": "maybe"}, code: ExitUsage, stderr: []string{"environment variable DRI_CDI_INCLUDE_DISPLAY_ONLY"}},
		"version":                {args: []string{"version"}, code: ExitOK, stdout: []string{"dri-cdi " + version.Version + " (go"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := run(t, tc.env, tc.args...)
			require.Equal(t, tc.code, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			for _, s := range tc.stdout {
				require.Contains(t, r.stdout, s)
			}
			for _, s := range tc.stderr {
				require.Contains(t, r.stderr, s)
			}
			if tc.noStout {
				require.Empty(t, r.stdout)
			}
			if tc.code == ExitOK {
				require.Empty(t, r.stderr)
			}
		})
	}
}

func TestRootUsageGolden(t *testing.T) {
	r := run(t, nil, "help")
	require.Equal(t, ExitOK, r.code)
	golden(t, "help", r.stdout)
}

func TestOutputAliasAndEnv(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		args []string
		env  map[string]string
		json bool
	}{
		"default":                 {args: []string{"cdi", "list", "--spec-dir", dir}},
		"long flag":               {args: []string{"cdi", "list", "--spec-dir", dir, "--output", "json"}, json: true},
		"short flag":              {args: []string{"cdi", "list", "--spec-dir", dir, "-o", "json"}, json: true},
		"env":                     {args: []string{"cdi", "list", "--spec-dir", dir}, env: map[string]string{"DRI_CDI_OUTPUT": "json"}, json: true},
		"short flag beats env":    {args: []string{"cdi", "list", "--spec-dir", dir, "-o", "text"}, env: map[string]string{"DRI_CDI_OUTPUT": "json"}},
		"long flag beats env":     {args: []string{"cdi", "list", "--spec-dir", dir, "--output", "text"}, env: map[string]string{"DRI_CDI_OUTPUT": "json"}},
		"alias has no env of its": {args: []string{"cdi", "list", "--spec-dir", dir}, env: map[string]string{"DRI_CDI_O": "json"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := run(t, tc.env, tc.args...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			if tc.json {
				require.Equal(t, "[]\n", r.stdout)
			} else {
				require.Empty(t, r.stdout)
			}
		})
	}
}
