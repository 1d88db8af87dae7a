package dra

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/agent"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
	"github.com/dri-cdi/dri-cdi/pkg/usage"
)

// TestNewFlagSet checks that the flags shared with the agent write into
// RunOptions.Agent, with the plugin's own metrics port.
func TestNewFlagSet(t *testing.T) {
	var o RunOptions
	fs := NewFlagSet(&o, &logging.Flags{})
	require.NoError(t, fs.Parse([]string{"--node-name=n1", "--sysfs-root=/s", "--dev-root=/d",
		"--cdi-dir=/c", "--config=/cfg", "--resync-interval=1m"}))
	require.Equal(t, "n1", o.NodeName)
	require.Equal(t, podresources.DefaultSocket, o.PodResourcesSocket)
	require.Equal(t, agent.Options{
		Roots: drm.Roots{Sysfs: "/s", Dev: "/d"}, CDIDir: "/c", ConfigPath: "/cfg",
		MetricsAddr: ":9472", ResyncInterval: time.Minute,
		Usage: usage.Config{Interval: usage.DefaultInterval, ProcRoot: usage.DefaultProcRoot, BundleDir: usage.DefaultBundleDir, IdleAfter: usage.DefaultIdleAfter},
	}, o.Agent)
}
