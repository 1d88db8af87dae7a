package deviceplugin

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
)

// deadSocket leaves a unix socket file nobody serves, as a crashed
// process does.
func deadSocket(t *testing.T, p string) {
	t.Helper()
	l, err := net.Listen("unix", p)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
	st, err := os.Lstat(p)
	require.NoError(t, err)
	require.NotZero(t, st.Mode()&os.ModeSocket)
}

func TestRemoveStaleSockets(t *testing.T) {
	dir := kubelettest.ShortDir(t)
	stale := filepath.Join(dir, SocketPrefix+"dri-cdi.dev_i915-dead.sock")
	deadSocket(t, stale)
	// Another plugin's dead socket, a live agent's socket, and a regular
	// file with our name are left alone.
	other := filepath.Join(dir, "intel-gpu-plugin.sock")
	deadSocket(t, other)
	live := filepath.Join(dir, SocketPrefix+"dri-cdi.dev_xe-live.sock")
	l, err := net.Listen("unix", live)
	require.NoError(t, err)
	defer l.Close()
	file := filepath.Join(dir, SocketPrefix+"notes.sock")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	checkpoint := filepath.Join(dir, "kubelet_internal_checkpoint")
	require.NoError(t, os.WriteFile(checkpoint, []byte("{}"), 0o600))

	m, err := NewManager(Options{KubeletDir: dir, Delivery: DeliveryCDICRI, Name: testName, Log: testLog(t)})
	require.NoError(t, err)
	removed, err := m.RemoveStaleSockets()
	require.NoError(t, err)
	require.Equal(t, []string{stale}, removed)
	require.NoFileExists(t, stale)
	for _, p := range []string{other, live, file, checkpoint} {
		_, err := os.Lstat(p)
		require.NoError(t, err, "%s must stay", p)
	}

	// A missing dir is nothing to clean.
	m2, err := NewManager(Options{KubeletDir: filepath.Join(dir, "missing"), Delivery: DeliveryCDICRI, Name: testName})
	require.NoError(t, err)
	removed, err = m2.RemoveStaleSockets()
	require.NoError(t, err)
	require.Empty(t, removed)
}
