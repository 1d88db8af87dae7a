package nri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// jsonLoad stands in for cdi.LoadDevices: every <card>.json in dir holds
// the card's nodes; a file that does not parse is left out and reported,
// the others are returned.
func jsonLoad(dir, _ string) (map[string][]drm.DeviceNode, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]drm.DeviceNode{}
	var errs []error
	for _, e := range entries {
		card, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var nodes []drm.DeviceNode
		if err := json.Unmarshal(b, &nodes); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Name(), err))
			continue
		}
		out[card] = nodes
	}
	return out, errors.Join(errs...)
}

// writeSpec replaces a card's file atomically, as the agent does.
func writeSpec(t *testing.T, dir, card string, content any) {
	t.Helper()
	b, ok := content.([]byte)
	if !ok {
		var err error
		b, err = json.Marshal(content)
		require.NoError(t, err)
	}
	tmp := filepath.Join(dir, ".tmp-"+card)
	require.NoError(t, os.WriteFile(tmp, b, 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, card+".json")))
}

func newStore(t *testing.T, dir string) *SpecIndex {
	return NewSpecIndex(dir, testKind, jsonLoad, nil, logrus.NewEntry(logrus.New()))
}

func hasNodes(s *SpecIndex, card string, n int) func() bool {
	return func() bool {
		nodes, ok := s.Nodes(card)
		return ok && len(nodes) == n
	}
}

func TestSpecIndexReload(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "cdi")
	s := newStore(t, dir)
	require.False(t, s.Loaded())
	_, ok := s.Nodes(cardA)
	require.False(t, ok)

	require.NoError(t, s.Reload(), "a missing directory holds no cards")
	require.True(t, s.Loaded())

	require.NoError(t, os.Mkdir(dir, 0o755))
	writeSpec(t, dir, cardA, testSource[cardA])
	writeSpec(t, dir, cdi.AllDevice, append(append([]drm.DeviceNode{}, testSource[cardA]...), testSource[cardB]...))
	require.NoError(t, s.Reload())
	nodes, ok := s.Nodes(cardA)
	require.True(t, ok)
	require.Equal(t, testSource[cardA], nodes)
	_, ok = s.Nodes(cdi.AllDevice)
	require.False(t, ok, "the all device is never injected")
	require.Equal(t, 1.0, testutil.ToFloat64(s.metrics.specCards))

	// One unusable file: the good ones are used, the error names the bad one.
	writeSpec(t, dir, cardB, []byte("{not json"))
	err := s.Reload()
	require.ErrorContains(t, err, dir)
	require.ErrorContains(t, err, cardB)
	_, ok = s.Nodes(cardA)
	require.True(t, ok)
	_, ok = s.Nodes(cardB)
	require.False(t, ok)
	require.Equal(t, 1.0, testutil.ToFloat64(s.metrics.specReloads.WithLabelValues("error")))
}

func TestSpecIndexLoadFailsAsAWhole(t *testing.T) {
	fail := false
	s := NewSpecIndex(t.TempDir(), testKind, func(string, string) (map[string][]drm.DeviceNode, error) {
		if fail {
			return nil, errors.New("boom")
		}
		return map[string][]drm.DeviceNode{cardA: testSource[cardA]}, nil
	}, nil, logrus.NewEntry(logrus.New()))
	require.NoError(t, s.Reload())
	fail = true
	require.ErrorContains(t, s.Reload(), "boom")
	_, ok := s.Nodes(cardA)
	require.True(t, ok, "cards loaded before stay after a failed load")
}

func TestSpecIndexFirstLoadFails(t *testing.T) {
	s := NewSpecIndex(t.TempDir(), testKind, func(string, string) (map[string][]drm.DeviceNode, error) {
		return nil, errors.New("boom")
	}, nil, logrus.NewEntry(logrus.New()))
	require.ErrorContains(t, s.Reload(), "boom")
	require.False(t, s.Loaded())
}

func TestSpecIndexWatch(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "cdi")
	s := newStore(t, dir)
	watching(t, s)

	require.Eventually(t, s.Loaded, 5*time.Second, 5*time.Millisecond)

	// The directory appears after the plugin started.
	require.NoError(t, os.Mkdir(dir, 0o755))
	writeSpec(t, dir, cardA, testSource[cardA])
	require.Eventually(t, hasNodes(s, cardA, 2), 5*time.Second, 5*time.Millisecond)

	// A card is added and an existing one changes.
	writeSpec(t, dir, cardB, testSource[cardB])
	writeSpec(t, dir, cardA, testSource[cardA][:1])
	require.Eventually(t, hasNodes(s, cardB, 3), 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, hasNodes(s, cardA, 1), 5*time.Second, 5*time.Millisecond)

	// A broken file does not take the others down.
	writeSpec(t, dir, "0000:05:00.0", []byte("garbage"))
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(s.metrics.specReloads.WithLabelValues("error")) >= 1
	}, 5*time.Second, 5*time.Millisecond)
	require.True(t, hasNodes(s, cardB, 3)())
	require.True(t, hasNodes(s, cardA, 1)())
	require.NoError(t, os.Remove(filepath.Join(dir, "0000:05:00.0.json")))

	// A card's file goes away.
	require.NoError(t, os.Remove(filepath.Join(dir, cardB+".json")))
	require.Eventually(t, func() bool { _, ok := s.Nodes(cardB); return !ok }, 5*time.Second, 5*time.Millisecond)

	// The whole directory goes away and comes back.
	require.NoError(t, os.RemoveAll(dir))
	require.Eventually(t, func() bool { _, ok := s.Nodes(cardA); return !ok }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, os.Mkdir(dir, 0o755))
	writeSpec(t, dir, cardB, testSource[cardB])
	require.Eventually(t, hasNodes(s, cardB, 3), 5*time.Second, 5*time.Millisecond)
}

// TestFromHost needs mknod: it runs as root only (SkipUnlessRoot).
func TestFromHost(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "renderD200")
	require.NoError(t, unix.Mknod(p, unix.S_IFCHR|0o640, int(unix.Mkdev(226, 200))))
	require.NoError(t, os.Chown(p, 0, 4242))
	require.NoError(t, os.Chmod(p, 0o640))

	got := fromHost(drm.DeviceNode{Path: "/dev/dri/renderD200", HostPath: p, Major: 226, Minor: 200})
	require.Equal(t, os.FileMode(0o640), got.Mode)
	require.Equal(t, uint32(4242), got.GID)

	// Other numbers than the spec's: the host node is not trusted.
	other := drm.DeviceNode{Path: "/dev/dri/renderD201", HostPath: p, Major: 226, Minor: 201, Mode: 0o600, GID: 7}
	require.Equal(t, other, fromHost(other))
}

func TestFromHostIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "regular")
	require.NoError(t, os.WriteFile(p, nil, 0o600))
	n := drm.DeviceNode{Path: "/dev/dri/card1", HostPath: p, Major: 226, Minor: 1, Mode: 0o660, GID: 44}
	require.Equal(t, n, fromHost(n))
	missing := drm.DeviceNode{Path: "/dev/dri/card1", HostPath: filepath.Join(dir, "nope"), Major: 226, Minor: 1}
	require.Equal(t, missing, fromHost(missing))
}

// watching runs s.Watch until the test ends; it must then return nil.
func watching(t *testing.T, s *SpecIndex) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Watch(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}
