package dracheckpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// oldCheckpoint is testdata/checkpoint-v1.json, written before devices
// recorded their resource: one claim on 0000:03:00.0.
const oldCheckpoint = "testdata/checkpoint-v1.json"

// savedClaimWithResource saves a checkpoint of one claim whose device
// records its resource (dri-cdi.dev/amdgpu), and returns its path and
// content.
func savedClaimWithResource(t *testing.T) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), File)
	require.NoError(t, Save(path, map[string]Claim{"uid-1": {Namespace: "ns", Name: "one", Devices: []Device{{
		Request: "gpu", Pool: "node-a", Device: "pci-0000-03-00-0", Card: "0000:03:00.0", CDI: []string{"dri-cdi.dev/gpu=0000:03:00.0"},
		Resource: "dri-cdi.dev/amdgpu",
	}}}}))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return path, b
}

// An earlier version reads a checkpoint this one wrote (a rollback, or
// the older instance of a rolling update): it knows no resource field,
// drops it, and checks the checksum of what it knows. earlierDevice is
// the device as that version declared it.
func TestEarlierVersionReadsThisCheckpoint(t *testing.T) {
	type earlierDevice struct {
		Request string   `json:"request"`
		Pool    string   `json:"pool"`
		Device  string   `json:"device"`
		Card    string   `json:"card"`
		CDI     []string `json:"cdi"`
	}
	type earlierClaim struct {
		Namespace string          `json:"namespace"`
		Name      string          `json:"name"`
		Devices   []earlierDevice `json:"devices"`
	}
	var earlier struct {
		Version  int                     `json:"version"`
		Claims   map[string]earlierClaim `json:"claims"`
		Checksum string                  `json:"checksum"`
	}
	_, b := savedClaimWithResource(t)
	require.Contains(t, string(b), `"resource":"dri-cdi.dev/amdgpu"`)
	require.NoError(t, json.Unmarshal(b, &earlier))
	require.Equal(t, 1, earlier.Version)
	raw, err := json.Marshal(earlier.Claims)
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	require.Equal(t, hex.EncodeToString(sum[:]), earlier.Checksum, "the checksum an earlier version checks")
}

// The added field is under a checksum too: an edited resource, or a
// resource in a file without the full checksum, is a corrupt file.
func TestCheckpointResourceIsChecked(t *testing.T) {
	path, b := savedClaimWithResource(t)
	var cp checkpoint
	require.NoError(t, json.Unmarshal(b, &cp))
	require.NotEmpty(t, cp.FullChecksum)
	withoutFull := strings.Replace(string(b), `,"fullChecksum":"`+cp.FullChecksum+`"`, "", 1)
	for name, content := range map[string]string{
		"edited resource":       strings.Replace(string(b), "dri-cdi.dev/amdgpu", "dri-cdi.dev/i915", 1),
		"without full checksum": withoutFull,
	} {
		t.Run(name, func(t *testing.T) {
			require.NotEqual(t, string(b), content)
			require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
			_, err := Load(path)
			require.EqualError(t, err, "checkpoint \""+path+"\" is corrupt: checksum mismatch")
		})
	}
}

// Whatever the file holds, Load returns claims or an error,
// and claims it returns save and load again unchanged.
func FuzzLoadCheckpoint(f *testing.F) {
	old, err := os.ReadFile(oldCheckpoint)
	require.NoError(f, err)
	f.Add(old)
	f.Add([]byte(`{"version":1,"claims":{},"checksum":""}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), File)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		claims, err := Load(path)
		if err != nil {
			require.ErrorContains(t, err, path)
			return
		}
		require.NoError(t, Save(path, claims))
		again, err := Load(path)
		require.NoError(t, err)
		require.Equal(t, claims, again)
	})
}

// The fields added after Resource (AdminAccess, then ShareID, Shares
// and Memory) are outside the frozen checksums, so an earlier version
// still reads a file this one wrote, and inside ClaimsChecksum, so an
// edit of them is caught here.
func TestCheckpointAddedFieldsAreChecked(t *testing.T) {
	cases := map[string]struct {
		dev        Device
		from, to   string
		withoutNew func(*Device)
	}{
		"adminAccess": {
			dev: Device{Request: "mon", Pool: "node", Device: "pci-0000-01-00-0", Card: "0000:01:00.0", CDI: []string{"dri-cdi.dev/gpu=0000:01:00.0"},
				Resource: "dri-cdi.dev/i915", AdminAccess: true},
			from: `"adminAccess":true`, to: `"adminAccess":false`,
			withoutNew: func(d *Device) { d.AdminAccess = false },
		},
		"memory": {
			dev: Device{Request: "gpu", Pool: "node", Device: "pci-0000-03-00-0", Card: "0000:03:00.0", CDI: []string{"dri-cdi.dev/gpu=0000:03:00.0"},
				Resource: "dri-cdi.dev/xe", ShareID: "s-1", Shares: 1, Memory: 4 << 30},
			from: `"memory":4294967296`, to: `"memory":8589934592`,
			withoutNew: func(d *Device) { d.ShareID, d.Shares, d.Memory = "", 0, 0 },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), File)
			claims := map[string]Claim{"uid-1": {Namespace: "ns", Name: "c", Devices: []Device{tc.dev}}}
			require.NoError(t, Save(path, claims))
			got, err := Load(path)
			require.NoError(t, err)
			require.Equal(t, claims, got)

			data, err := os.ReadFile(path)
			require.NoError(t, err)
			edited := strings.Replace(string(data), tc.from, tc.to, 1)
			require.NotEqual(t, string(data), edited)
			require.NoError(t, os.WriteFile(path, []byte(edited), 0o600))
			_, err = Load(path)
			require.EqualError(t, err, fmt.Sprintf("checkpoint %q is corrupt: checksum mismatch", path))

			// What an earlier version checks: Checksum and FullChecksum
			// over the fields it knows, which leave the new ones out.
			var cp struct {
				Claims                 map[string]Claim
				Checksum, FullChecksum string
			}
			require.NoError(t, json.Unmarshal(data, &cp))
			base, err := claimsSum(cp.Claims, true)
			require.NoError(t, err)
			full, err := claimsSum(cp.Claims, false)
			require.NoError(t, err)
			require.Equal(t, cp.Checksum, base)
			require.Equal(t, cp.FullChecksum, full)
			old := cp.Claims["uid-1"]
			old.Devices = slices.Clone(old.Devices)
			tc.withoutNew(&old.Devices[0])
			fullOld, err := claimsSum(map[string]Claim{"uid-1": old}, false)
			require.NoError(t, err)
			require.Equal(t, cp.FullChecksum, fullOld, "a reader without the fields computes the same sum")
		})
	}
}
