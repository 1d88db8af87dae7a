package deviceplugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/kubeletcheckpoint"
	"github.com/dri-cdi/dri-cdi/pkg/metrics"
)

// writeCheckpoint writes a kubelet device manager checkpoint in the
// v1.37 format with the given allocations (resource -> device IDs).
func writeCheckpoint(t *testing.T, dir string, allocs map[string][]string) {
	t.Helper()
	type entry struct {
		PodUID, ContainerName, ResourceName string
		DeviceIDs                           map[string][]string
		AllocResp                           []byte
	}
	var entries []entry
	for res, ids := range allocs {
		entries = append(entries, entry{PodUID: "uid-1", ContainerName: "app", ResourceName: res,
			DeviceIDs: map[string][]string{"-1": ids}, AllocResp: []byte("{}")})
	}
	data := map[string]any{"Data": map[string]any{"PodDeviceEntries": entries, "RegisteredDevices": map[string][]string{}}, "Checksum": 1}
	b, err := json.Marshal(data)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, kubeletcheckpoint.FileName), b, 0o600))
}

func testBackend(t *testing.T, kubeletDir string) *Backend {
	t.Helper()
	b, err := NewBackend(config.Default(), metrics.NewAgent("test"), BackendOptions{KubeletDir: kubeletDir, Delivery: "cdi-cri", Log: logrus.NewEntry(logrus.New())})
	require.NoError(t, err)
	return b
}

// The cards in use are the card IDs (replica suffix dropped) the
// kubelet's checkpoint records under a resource the config serves, each
// with that resource; a foreign resource's devices are not ours.
func TestCardsInUseFromTheKubeletCheckpoint(t *testing.T) {
	kubelet := t.TempDir()
	writeCheckpoint(t, kubelet, map[string][]string{
		"dri-cdi.dev/i915":    {"0000:01:00.0", "0000:09:00.0"},
		"dri-cdi.dev/xe":      {"0000:03:00.0::1"},
		"example.com/foreign": {"0000:05:00.0"},
	})
	held, err := testBackend(t, kubelet).CardsInUse()
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		"0000:01:00.0": "dri-cdi.dev/i915",
		"0000:09:00.0": "dri-cdi.dev/i915",
		"0000:03:00.0": "dri-cdi.dev/xe",
	}, held)
}

func TestCardsInUseCheckpointErrors(t *testing.T) {
	dir := t.TempDir()
	b := testBackend(t, dir)
	held, err := b.CardsInUse()
	require.NoError(t, err, "no checkpoint: nothing in use")
	require.Empty(t, held)
	require.NoError(t, os.WriteFile(filepath.Join(dir, kubeletcheckpoint.FileName), []byte("{garbage"), 0o600))
	_, err = b.CardsInUse()
	require.ErrorContains(t, err, "kubelet checkpoint "+filepath.Join(dir, kubeletcheckpoint.FileName))
}

func TestNewBackendChecks(t *testing.T) {
	_, err := NewBackend(config.Default(), metrics.NewAgent("test"), BackendOptions{KubeletDir: t.TempDir(), Delivery: "cdi"})
	require.EqualError(t, err, "no logger")
	_, err = NewBackend(config.Default(), metrics.NewAgent("test"), BackendOptions{KubeletDir: t.TempDir(), Delivery: "cdi", Log: logrus.NewEntry(logrus.New())})
	require.ErrorContains(t, err, `invalid delivery mode "cdi"`)
	_, err = NewBackend(config.Default(), metrics.NewAgent("test"), BackendOptions{Delivery: "nri", Log: logrus.NewEntry(logrus.New())})
	require.EqualError(t, err, "kubelet dir is empty")
	b := testBackend(t, "/x/device-plugins")
	require.Equal(t, "/x/device-plugins", b.HostDirs()[0].Path)
	require.Contains(t, b.HostDirs()[0].Missing, "--kubelet-dir")
}
