package scenarios

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// TestHotplug adds a card to the live fake tree, then removes it: the
// kubelet's allocatable devices and the CDI specs must follow.
func TestHotplug(t *testing.T) {
	ctx := context.Background()
	first, hot := harness.IntelGPU(0), harness.IntelGPU(1)
	n := startNode(t, harness.NodeOptions{
		Name: "hotplug", GPUs: []drmtest.GPU{first}, Delivery: harness.DeliveryCDICRI, NRI: true,
	})
	require.NoError(t, n.WaitAllocatableExactly(ctx, resource, []string{first.ID()}, 90*time.Second))
	require.NotContains(t, cdiNames(t, n), cdiName(hot))

	t.Logf("allocatable before: %v, CDI devices: %v", allocatable(t, n), cdiNames(t, n))
	require.NoError(t, n.Tree.Add(hot))
	require.NoError(t, n.WaitAllocatableExactly(ctx, resource, []string{first.ID(), hot.ID()}, 60*time.Second), "allocatable must grow")
	require.Eventually(t, func() bool { return contains(cdiNames(t, n), cdiName(hot)) }, 30*time.Second, 250*time.Millisecond, "the new card's CDI device must appear")
	hotFile := filepath.Join(n.CDIDir, strings.ReplaceAll(cdiKind, "/", "-")+"_"+strings.ReplaceAll(hot.ID(), ":", "-")+".yaml")
	require.FileExists(t, hotFile)

	t.Logf("allocatable after adding %s: %v, CDI devices: %v", hot.ID(), allocatable(t, n), cdiNames(t, n))
	require.NoError(t, n.Tree.Remove(hot.ID()))
	require.NoError(t, n.WaitAllocatableExactly(ctx, resource, []string{first.ID()}, 60*time.Second), "allocatable must shrink")
	require.Eventually(t, func() bool { return !contains(cdiNames(t, n), cdiName(hot)) }, 30*time.Second, 250*time.Millisecond, "the removed card's CDI device must go")
	_, err := os.Stat(hotFile)
	require.ErrorIs(t, err, os.ErrNotExist, "the removed card's spec file must go")
	require.Contains(t, cdiNames(t, n), cdiName(first), "the remaining card must keep its CDI device")
	t.Logf("allocatable after removing %s: %v, CDI devices: %v", hot.ID(), allocatable(t, n), cdiNames(t, n))
}
