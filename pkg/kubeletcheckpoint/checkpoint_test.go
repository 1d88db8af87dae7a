package kubeletcheckpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// sample has the layout kubelet v1.37 writes (json.Marshal of
// checkpoint.Data): NUMA keys as strings, AllocResp as base64, the
// registered devices and the checksum.
const sample = `{"Data":{"PodDeviceEntries":[` +
	`{"PodUID":"4d3c2f1e-0000-4000-8000-000000000001","ContainerName":"init","ResourceName":"dri-cdi.dev/i915","DeviceIDs":{"-1":["0000:00:02.0"]},"AllocResp":"CgQKAmZvbw=="},` +
	`{"PodUID":"4d3c2f1e-0000-4000-8000-000000000001","ContainerName":"app","ResourceName":"dri-cdi.dev/i915","DeviceIDs":{"-1":["0000:00:02.0"]},"AllocResp":"CgQKAmZvbw=="},` +
	`{"PodUID":"4d3c2f1e-0000-4000-8000-000000000001","ContainerName":"app","ResourceName":"example.com/nic","DeviceIDs":{"0":["nic1"],"1":["nic0","nic1"]},"AllocResp":""},` +
	`{"PodUID":"99999999-0000-4000-8000-000000000002","ContainerName":"init","ResourceName":"dri-cdi.dev/i915","DeviceIDs":{"0":["0000:03:00.0::1"]},"AllocResp":null}` +
	`],"RegisteredDevices":{"dri-cdi.dev/i915":["0000:00:02.0","0000:03:00.0::1"]}},"Checksum":1234567890,"BootID":"b"}`

const podA = "4d3c2f1e-0000-4000-8000-000000000001"

func TestParseAndLookup(t *testing.T) {
	cp, err := Parse([]byte(sample))
	require.NoError(t, err)
	require.Len(t, cp.Entries, 4)

	tests := map[string]struct {
		pod, container string
		want           map[string][]string
	}{
		"init container": {podA, "init", map[string][]string{"dri-cdi.dev/i915": {"0000:00:02.0"}}},
		"app container, two resources, NUMA merged": {podA, "app", map[string][]string{
			"dri-cdi.dev/i915": {"0000:00:02.0"}, "example.com/nic": {"nic0", "nic1"},
		}},
		"other pod's UID":                      {"99999999-0000-4000-8000-000000000002", "init", map[string][]string{"dri-cdi.dev/i915": {"0000:03:00.0::1"}}},
		"same container name, unknown pod UID": {"4d3c2f1e-0000-4000-8000-000000000009", "init", nil},
		"known pod, unknown container":         {podA, "sidecar", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := cp.ContainerDevices(tc.pod, tc.container)
			if tc.want == nil {
				require.ErrorIs(t, err, ErrNotAllocated)
				require.Contains(t, err.Error(), tc.pod)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := map[string]struct {
		data, want string
	}{
		"empty":          {"", "EOF"},
		"not JSON":       {"kubelet", "invalid character"},
		"no Data":        {`{"Checksum":1}`, `no "Data" object`},
		"Data null":      {`{"Data":null}`, `no "Data" object`},
		"trailing data":  {`{"Data":{}} {}`, "trailing data"},
		"empty pod UID":  {`{"Data":{"PodDeviceEntries":[{"ContainerName":"c","ResourceName":"r","DeviceIDs":{"0":["a"]}}]}}`, "entry 0: empty PodUID"},
		"empty name":     {`{"Data":{"PodDeviceEntries":[{"PodUID":"u","ResourceName":"r","DeviceIDs":{"0":["a"]}}]}}`, "empty ContainerName"},
		"empty resource": {`{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","DeviceIDs":{"0":["a"]}}]}}`, "empty ResourceName"},
		"NUMA not int":   {`{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"r","DeviceIDs":{"x":["a"]}}]}}`, `NUMA node "x"`},
		"empty ID":       {`{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"r","DeviceIDs":{"0":[""]}}]}}`, "empty device ID"},
		"wrong type":     {`{"Data":{"PodDeviceEntries":{}}}`, "cannot unmarshal"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data))
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := Parse(make([]byte, MaxSize+1))
	require.ErrorIs(t, err, ErrInvalid)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte(`{"Data":{"PodDeviceEntries":[]}}`))
	f.Add([]byte(`{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"r","DeviceIDs":{"0":["a","a"]}}]}}`))
	f.Add([]byte(`{"Data":{"PodDeviceEntries":[{"PodUID":"u","ContainerName":"c","ResourceName":"r","DeviceIDs":{"0":null}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cp, err := Parse(data)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalid)
			require.Nil(t, cp)
			return
		}
		for _, e := range cp.Entries {
			require.NotEmpty(t, e.PodUID)
			require.NotEmpty(t, e.ContainerName)
			require.NotEmpty(t, e.ResourceName)
			got, err := cp.ContainerDevices(e.PodUID, e.ContainerName)
			if len(e.DeviceIDs) == 0 {
				continue
			}
			require.NoError(t, err)
			for _, id := range e.DeviceIDs {
				require.NotEmpty(t, id)
				require.Contains(t, got[e.ResourceName], id, "an entry's IDs are found under its own pod, container and resource")
			}
		}
	})
}

func TestReader(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	r := NewReader(path, 0)
	require.Equal(t, path, r.Path())
	ctx := context.Background()

	_, err := r.ContainerDevices(ctx, podA, "init")
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorContains(t, err, path)
	require.NotErrorIs(t, err, ErrNotAllocated, "a missing file is not a confirmed absence")

	replace := func(data string) {
		tmp := filepath.Join(dir, ".tmp")
		require.NoError(t, os.WriteFile(tmp, []byte(data), 0o600))
		require.NoError(t, os.Rename(tmp, path), "the kubelet replaces the file by rename")
	}
	replace(sample)
	got, err := r.ContainerDevices(ctx, podA, "init")
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"dri-cdi.dev/i915": {"0000:00:02.0"}}, got)
	first := r.cached
	_, err = r.ContainerDevices(ctx, podA, "app")
	require.NoError(t, err)
	require.Same(t, first, r.cached, "an unchanged file is not parsed again")

	// The pod is gone: the kubelet rewrites the checkpoint without it.
	replace(`{"Data":{"PodDeviceEntries":[],"RegisteredDevices":{}},"Checksum":1}`)
	_, err = r.ContainerDevices(ctx, podA, "init")
	require.ErrorIs(t, err, ErrNotAllocated)

	replace("{")
	_, err = r.ContainerDevices(ctx, podA, "init")
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, path)

	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Mkdir(path, 0o700))
	_, err = r.ContainerDevices(ctx, podA, "init")
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "not a regular file")

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = r.ContainerDevices(canceled, podA, "init")
	require.Error(t, err)
}
