package flagenv

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestApply(t *testing.T) {
	env := map[string]string{
		"DRI_CDI_SYSFS_ROOT": "/host/sys",
		"DRI_CDI_DEV_ROOT":   "/from-env",
		"DRI_CDI_REPLICAS":   "3",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	sysfs := fs.String("sysfs-root", "/sys", "")
	dev := fs.String("dev-root", "/dev", "")
	reps := fs.Int("replicas", 1, "")
	other := fs.String("other", "default", "")
	require.NoError(t, fs.Parse([]string{"--dev-root", "/from-flag"}))
	require.NoError(t, Apply(fs, "DRI_CDI", lookup))
	require.Equal(t, "/host/sys", *sysfs)
	require.Equal(t, "/from-flag", *dev, "a command-line flag wins over the environment")
	require.Equal(t, 3, *reps)
	require.Equal(t, "default", *other)
}

func TestApplyInvalid(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Int("replicas", 1, "")
	require.NoError(t, fs.Parse(nil))
	err := Apply(fs, "X", func(string) (string, bool) { return "many", true })
	require.ErrorContains(t, err, "X_REPLICAS")
	require.ErrorContains(t, err, `"many"`)
}

func TestUsage(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.String("cdi-dir", "", "CDI spec dir")
	Usage(fs, "DRI_CDI_AGENT")
	require.Equal(t, "CDI spec dir (env DRI_CDI_AGENT_CDI_DIR)", fs.Lookup("cdi-dir").Usage)
}
