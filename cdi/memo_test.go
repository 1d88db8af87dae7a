package cdi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi/cditest"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// The memo keys on the cards' content, not on the caller's slice: a caller
// that changes a card in place between two Syncs gets the new card's spec.
func TestWriterSyncCardChangedInPlace(t *testing.T) {
	dir := memTempDir(t)
	w := newTestWriter(t, dir)
	cards := []drm.Card{i915("0000:00:02.0", 0, 128)}
	_, err := w.Sync(cards)
	require.NoError(t, err)
	want, err := Generate(DefaultKind, cards)
	require.NoError(t, err)

	cards[0].RenderNode.Minor = 130
	cards[0].CardNode.Minor = 2
	changed, err := w.Sync(cards)
	require.NoError(t, err)
	require.True(t, changed, "a changed card must be written")
	now, err := Generate(DefaultKind, cards)
	require.NoError(t, err)
	require.NotEqual(t, string(want[0].Data), string(now[0].Data))
	got := cditest.DirFiles(t, dir)
	for _, f := range now {
		require.Equal(t, string(f.Data), got[f.Name], f.Name)
	}
}

// With equal cards the files on disk are still compared: a spec file
// changed or removed behind the Writer's back is restored.
func TestWriterSyncRestoresFilesWithEqualCards(t *testing.T) {
	dir := memTempDir(t)
	w := newTestWriter(t, dir)
	cards := []drm.Card{i915("0000:00:02.0", 0, 128), amdgpu("0000:03:00.0", 1, 129)}
	_, err := w.Sync(cards)
	require.NoError(t, err)
	want := cditest.DirFiles(t, dir)

	name := "dri-cdi.dev-gpu_0000-00-02.0.yaml"
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("tampered"), FileMode))
	require.NoError(t, os.Remove(filepath.Join(dir, "dri-cdi.dev-gpu_all.yaml")))
	changed, err := w.Sync(cards)
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, want, cditest.DirFiles(t, dir))

	changed, err = w.Sync(cards)
	require.NoError(t, err)
	require.False(t, changed)
}

// A failed generation forgets the memo; the cards before it are generated
// again, not taken from a memo of other cards.
func TestWriterSyncAfterInvalidCards(t *testing.T) {
	dir := memTempDir(t)
	w := newTestWriter(t, dir)
	a := i915("0000:00:02.0", 0, 128)
	_, err := w.Sync([]drm.Card{a})
	require.NoError(t, err)
	bad := a
	bad.ID = "bad/id"
	_, err = w.Sync([]drm.Card{bad})
	require.ErrorIs(t, err, ErrInvalidCard)
	changed, err := w.Sync([]drm.Card{a})
	require.NoError(t, err)
	require.False(t, changed)
	want, err := Generate(DefaultKind, []drm.Card{a})
	require.NoError(t, err)
	got := cditest.DirFiles(t, dir)
	require.Len(t, got, len(want))
}
