package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
)

func TestHostPathsWarnOnceAndClear(t *testing.T) {
	root := t.TempDir()
	sysfs, kubelet := filepath.Join(root, "sys"), filepath.Join(root, "device-plugins")
	require.NoError(t, os.MkdirAll(sysfs, 0o755))
	log, hook := logtest.NewNullLogger()
	h := newHostPaths(sysfs, []HostDir{{Path: kubelet, Missing: "the kubelet's device plugin directory (--kubelet-dir) is missing"}}, logrus.NewEntry(log))

	h.check()
	h.check() // unchanged: logged once
	w := h.Warnings()
	require.Len(t, w, 2)
	require.Contains(t, w[0], filepath.Join(sysfs, "class", "drm")+": does not exist: no DRM driver")
	require.Contains(t, w[1], kubelet+": does not exist: the kubelet's device plugin directory (--kubelet-dir)")
	require.Len(t, hook.AllEntries(), 2)
	for _, e := range hook.AllEntries() {
		require.Equal(t, logrus.WarnLevel, e.Level)
	}

	// A file where a directory belongs is named as such.
	require.NoError(t, os.WriteFile(kubelet, nil, 0o600))
	h.check()
	require.Contains(t, h.Warnings()[1], "is not a directory")

	hook.Reset()
	require.NoError(t, os.Remove(kubelet))
	require.NoError(t, os.MkdirAll(kubelet, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(sysfs, "class", "drm"), 0o755))
	h.check()
	require.Empty(t, h.Warnings())
	require.Len(t, hook.AllEntries(), 2, "each warning that went away is logged")
	for _, e := range hook.AllEntries() {
		require.Equal(t, logrus.InfoLevel, e.Level)
		require.Equal(t, "host path is back", e.Message)
	}
}
