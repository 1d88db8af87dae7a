package agent

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/metrics/metricstest"
)

func TestHostPathsWarnOnceAndClear(t *testing.T) {
	root := t.TempDir()
	sysfs, kubelet := filepath.Join(root, "sys"), filepath.Join(root, "device-plugins")
	require.NoError(t, os.MkdirAll(sysfs, 0o755))
	log, hook := logtest.NewNullLogger()
	h := newHostPaths(sysfs, kubelet, logrus.NewEntry(log))

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

// TestAgentReadyButSaysWhyWithoutDRMOrKubeletDir runs the agent on a node
// without <sysfs>/class/drm and without the kubelet's directory: it keeps
// running and is ready (a node without a GPU is normal), and both its log
// and /readyz name each missing directory.
func TestAgentReadyButSaysWhyWithoutDRMOrKubeletDir(t *testing.T) {
	root := t.TempDir()
	roots := drm.Roots{Sysfs: filepath.Join(root, "sys"), Dev: filepath.Join(root, "dev")}
	require.NoError(t, os.MkdirAll(roots.Sysfs, 0o755))
	kubelet := filepath.Join(root, "no-kubelet", "device-plugins")

	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	base := runAgent(t, Options{Roots: roots, KubeletDir: kubelet, Log: logrus.NewEntry(log)}).metrics
	var code int
	var body string
	require.Eventually(t, func() bool {
		code, body = metricstest.Get(t, base+"/readyz")
		return strings.HasPrefix(body, "ok\n")
	}, wait, tick)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "\nwarning: "+filepath.Join(roots.Sysfs, "class", "drm")+": does not exist")
	require.Contains(t, body, "\nwarning: "+kubelet+": does not exist")

	var warned []string
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.WarnLevel {
			warned = append(warned, e.Message)
		}
	}
	require.Contains(t, strings.Join(warned, "\n"), "class/drm: does not exist: no DRM driver")
	require.Contains(t, strings.Join(warned, "\n"), kubelet+": does not exist")
}

// TestAgentReadyzHasNoWarningOnAHealthyNode is the counterpart: with both
// directories there, /readyz says only ok.
func TestAgentReadyzHasNoWarningOnAHealthyNode(t *testing.T) {
	tree, err := drmtest.NewTree(t.TempDir())
	require.NoError(t, err)
	base := runAgent(t, Options{Roots: tree.Roots(), KubeletDir: kubelettest.ShortDir(t), Log: testEntry(t)}).metrics
	var code int
	var body string
	require.Eventually(t, func() bool {
		code, body = metricstest.Get(t, base+"/readyz")
		return code == http.StatusOK
	}, wait, tick)
	require.Equal(t, "ok\n", body)
}
