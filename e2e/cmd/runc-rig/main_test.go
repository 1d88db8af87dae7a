package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// kubeletSpec is the shape of what the kubelet and containerd ask of runc
// for a besteffort container on cgroup v2, with the device rules the
// tests measure.
const kubeletSpec = `{
  "process": {"oomScoreAdj": -998},
  "linux": {
    "resources": {
      "devices": [{"allow": false, "access": "rwm"}, {"allow": true, "type": "c", "major": 226, "minor": 128, "access": "rw"}],
      "cpu": {"shares": 2, "period": 100000, "cpus": "0-1"},
      "memory": {"limit": 0},
      "pids": {"limit": 0},
      "hugepageLimits": [{"pageSize": "2MB", "limit": 0}],
      "unified": {"memory.oom.group": "1", "hugetlb.2MB.rsvd.max": "0"}
    }
  }
}`

func TestRewrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"nothing to adapt", Config{}, kubeletSpec},
		{"oom clamp only", Config{ClampOOMScoreAdj: true}, `{
  "process": {"oomScoreAdj": 0},
  "linux": {"resources": {
      "devices": [{"allow": false, "access": "rwm"}, {"allow": true, "type": "c", "major": 226, "minor": 128, "access": "rw"}],
      "cpu": {"shares": 2, "period": 100000, "cpus": "0-1"},
      "memory": {"limit": 0}, "pids": {"limit": 0},
      "hugepageLimits": [{"pageSize": "2MB", "limit": 0}],
      "unified": {"memory.oom.group": "1", "hugetlb.2MB.rsvd.max": "0"}}}}`},
		{"v2 root offering hugetlb only", Config{ClampOOMScoreAdj: true, DropControllers: []string{"cpu", "memory", "pids"}}, `{
  "process": {"oomScoreAdj": 0},
  "linux": {"resources": {
      "devices": [{"allow": false, "access": "rwm"}, {"allow": true, "type": "c", "major": 226, "minor": 128, "access": "rw"}],
      "cpu": {"cpus": "0-1"},
      "hugepageLimits": [{"pageSize": "2MB", "limit": 0}],
      "unified": {"hugetlb.2MB.rsvd.max": "0"}}}}`},
		{"v2 root offering nothing", Config{DropControllers: []string{"cpu", "cpuset", "memory", "pids", "hugetlb", "io"}}, `{
  "process": {"oomScoreAdj": -998},
  "linux": {"resources": {
      "devices": [{"allow": false, "access": "rwm"}, {"allow": true, "type": "c", "major": 226, "minor": 128, "access": "rw"}]}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.json")
			require.NoError(t, os.WriteFile(path, []byte(kubeletSpec), 0o600))
			require.NoError(t, rewrite(path, tc.cfg))
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(got))
		})
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	cfg, err := loadConfig(filepath.Join(dir, ConfigName))
	require.NoError(t, err)
	require.Equal(t, Config{}, cfg, "no file: nothing to adapt")

	data, err := json.Marshal(Config{ClampOOMScoreAdj: true, DropControllers: []string{"cpu"}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ConfigName), data, 0o644))
	cfg, err = loadConfig(filepath.Join(dir, ConfigName))
	require.NoError(t, err)
	require.Equal(t, Config{ClampOOMScoreAdj: true, DropControllers: []string{"cpu"}}, cfg)
}

func TestBundleArg(t *testing.T) {
	require.Equal(t, "/b", bundleArg([]string{"--root", "/r", "create", "--bundle", "/b", "id"}))
	require.Equal(t, "/b", bundleArg([]string{"run", "--bundle=/b", "id"}))
	require.Equal(t, ".", bundleArg([]string{"create", "id"}))
	require.Equal(t, "", bundleArg([]string{"start", "id"}))
}
