package dra

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// oldCheckpoint is testdata/checkpoint-v1.json, written by saveCheckpoint
// before devices recorded their resource: one claim on 0000:03:00.0.
const oldCheckpoint = "testdata/checkpoint-v1.json"

// copyCheckpoint copies src to a fresh CheckpointFile and returns its path.
func copyCheckpoint(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), CheckpointFile)
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// A checkpoint an earlier version wrote loads (its checksum stays
// valid), its devices have no resource, and the claims it holds keep
// their cards in use with an unknown resource; saved again, it still
// loads.
func TestCheckpointOfAnEarlierVersionLoads(t *testing.T) {
	path := copyCheckpoint(t, oldCheckpoint)
	claims, err := loadCheckpoint(path)
	require.NoError(t, err)
	require.Equal(t, map[string]PreparedClaim{"uid-old": {Namespace: "ns", Name: "old", Devices: []PreparedDevice{{
		Request: "gpu", Pool: "node-a", Device: "pci-0000-03-00-0", Card: "0000:03:00.0", CDI: []string{"dri-cdi.dev/gpu=0000:03:00.0"},
	}}}}, claims)

	d := &Driver{claims: newClaimStore(path)}
	held, err := d.CardsInUse()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"0000:03:00.0": ""}, held)

	claims["uid-new"] = PreparedClaim{Namespace: "ns", Name: "new", Devices: []PreparedDevice{{
		Request: "gpu", Pool: "node-a", Device: "pci-0000-00-02-0", Card: "0000:00:02.0", CDI: []string{"dri-cdi.dev/gpu=0000:00:02.0"},
		Resource: "dri-cdi.dev/i915",
	}}}
	require.NoError(t, saveCheckpoint(path, claims))
	again, err := loadCheckpoint(path)
	require.NoError(t, err)
	require.Equal(t, claims, again)
	held, err = d.CardsInUse()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"0000:03:00.0": "", "0000:00:02.0": "dri-cdi.dev/i915"}, held)
}
