package agent

import (
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
	"github.com/dri-cdi/dri-cdi/pkg/logging/loggingtest"
)

// lastCards is a recorder that also keeps the cards of the last spec
// sync.
type lastCards struct {
	recorder
	cards []drm.Card
}

func (l *lastCards) Sync(cards []drm.Card) (bool, error) {
	l.cards = append([]drm.Card(nil), cards...)
	return l.recorder.Sync(cards)
}

// An NPU goes through the loop's discovery step like a card: its pool is
// its driver's, an unbind lists it Unhealthy with a spec without nodes,
// a rebind under another accel minor brings it back with the new node,
// and an unplug removes it.
func TestReconcileAccelLifecycle(t *testing.T) {
	drmtest.SkipUnlessRoot(t)
	tree := drmtest.MustBuild(t, drmtest.IntelIGPU, drmtest.IntelNPU)
	rec := &lastCards{}
	r := NewReconciler(config.Default(), DiscoverFunc(func() (*drm.Inventory, error) { return drm.Discover(tree.Roots()) }),
		rec, rec, loggingtest.New(t, logrus.InfoLevel), nil)
	const npu, igpu = "0000:00:0b.0", "0000:00:02.0"
	accelOf := func() string {
		for _, c := range rec.cards {
			if c.ID == npu && c.AccelNode != nil {
				return c.AccelNode.Path
			}
		}
		return ""
	}

	requirePass(t, r, &rec.recorder, "startup",
		"specs "+igpu+","+npu,
		"pools dri-cdi.dev/i915="+igpu+" dri-cdi.dev/intel_vpu="+npu)
	require.Equal(t, "/dev/accel/accel0", accelOf())

	require.NoError(t, tree.Unbind(npu))
	requirePass(t, r, &rec.recorder, "uevent",
		"specs "+igpu+","+npu+"(no nodes)",
		"pools dri-cdi.dev/i915="+igpu+" dri-cdi.dev/intel_vpu="+npu+"(unhealthy)")
	require.Equal(t, []string{npu}, r.Unhealthy())

	require.NoError(t, tree.RebindAs(npu, 1, -1))
	requirePass(t, r, &rec.recorder, "uevent",
		"specs "+igpu+","+npu,
		"pools dri-cdi.dev/i915="+igpu+" dri-cdi.dev/intel_vpu="+npu)
	require.Equal(t, "/dev/accel/accel1", accelOf())
	require.Empty(t, r.Unhealthy())

	// A surprise removal of a bound device: listed gone first, then its
	// spec goes, as for a card.
	require.NoError(t, tree.Remove(npu))
	requirePass(t, r, &rec.recorder, "uevent",
		"specs "+igpu+","+npu,
		"pools dri-cdi.dev/i915="+igpu,
		"specs "+igpu)
}
