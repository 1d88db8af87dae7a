package agent

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/logging/loggingtest"
)

// recorder notes every spec sync and pool update, in order.
type recorder struct {
	calls   []string
	specErr error
	pubErr  error
}

func (r *recorder) Sync(cards []drm.Card) (bool, error) {
	ids := make([]string, 0, len(cards))
	for _, c := range cards {
		id := c.ID
		if cdi.IsUnavailable(&c) {
			id += "(no nodes)"
		}
		ids = append(ids, id)
	}
	r.calls = append(r.calls, "specs "+strings.Join(ids, ","))
	return true, r.specErr
}

func (r *recorder) Update(pools []config.Pool, unhealthy map[string]bool) error {
	var parts []string
	for _, p := range pools {
		var ids []string
		for _, c := range p.Cards {
			id := c.ID
			if unhealthy[c.ID] {
				id += "(unhealthy)"
			}
			ids = append(ids, id)
		}
		parts = append(parts, p.Resource+"="+strings.Join(ids, ","))
	}
	r.calls = append(r.calls, "pools "+strings.Join(parts, " "))
	return r.pubErr
}

func (r *recorder) take() []string {
	c := r.calls
	r.calls = nil
	return c
}

// requirePass runs one Reconcile for trigger and requires it to succeed
// with exactly the spec writes and publications in want.
func requirePass(t *testing.T, r *Reconciler, rec *recorder, trigger string, want ...string) {
	t.Helper()
	require.NoError(t, r.Reconcile(trigger))
	require.Equal(t, want, rec.take())
}

type fakeHost struct {
	cards  map[string]drm.Card
	sysfs  map[string]bool
	err    error
	skip   []error
	passes int
}

func (h *fakeHost) Discover() (*drm.Inventory, error) {
	h.passes++
	if h.err != nil {
		return nil, h.err
	}
	inv := &drm.Inventory{Cards: []drm.Card{}, Skipped: h.skip}
	for _, c := range h.cards {
		inv.Cards = append(inv.Cards, c)
	}
	slices.SortFunc(inv.Cards, func(a, b drm.Card) int { return strings.Compare(a.ID, b.ID) })
	return inv, nil
}

func (h *fakeHost) plug(c drm.Card)   { h.cards[c.ID] = c; h.sysfs[c.SysfsPath] = true }
func (h *fakeHost) unbind(id string)  { delete(h.cards, id) }
func (h *fakeHost) unplug(c drm.Card) { delete(h.cards, c.ID); delete(h.sysfs, c.SysfsPath) }

func gpu(id, driver string, minor uint32) drm.Card {
	return drm.Card{ID: id, Driver: driver, NUMANode: -1, SysfsPath: "/sys/devices/" + id,
		CardNode:   drm.DeviceNode{Path: fmt.Sprintf("/dev/dri/card%d", minor), Major: 226, Minor: minor},
		RenderNode: &drm.DeviceNode{Path: fmt.Sprintf("/dev/dri/renderD%d", 128+minor), Major: 226, Minor: 128 + minor}}
}

func newTestReconciler(t *testing.T, cfg *config.Config) (*Reconciler, *fakeHost, *recorder) {
	host := &fakeHost{cards: map[string]drm.Card{}, sysfs: map[string]bool{}}
	rec := &recorder{}
	r := NewReconciler(cfg, host, rec, rec, loggingtest.New(t, logrus.InfoLevel), nil)
	r.exists = func(p string) bool { return host.sysfs[p] }
	return r, host, rec
}

func TestReconcileLifecycle(t *testing.T) {
	r, host, rec := newTestReconciler(t, config.Default())
	a, b, c := gpu("0000:01:00.0", "i915", 0), gpu("0000:02:00.0", "i915", 1), gpu("0000:03:00.0", "xe", 2)
	const i915, xe = "dri-cdi.dev/i915", "dri-cdi.dev/xe"

	steps := []struct {
		name   string
		change func()
		want   []string
	}{
		{"startup", func() { host.plug(a); host.plug(b) }, []string{
			"specs 0000:01:00.0,0000:02:00.0",
			"pools " + i915 + "=0000:01:00.0,0000:02:00.0",
		}},
		{"nothing changed", func() {}, []string{
			"specs 0000:01:00.0,0000:02:00.0",
			"pools " + i915 + "=0000:01:00.0,0000:02:00.0",
		}},
		{"hotplug: spec before list", func() { host.plug(c) }, []string{
			"specs 0000:01:00.0,0000:02:00.0,0000:03:00.0",
			"pools " + i915 + "=0000:01:00.0,0000:02:00.0 " + xe + "=0000:03:00.0",
		}},
		{"unbind: listed unhealthy, spec kept without nodes", func() { host.unbind(b.ID) }, []string{
			"specs 0000:01:00.0,0000:02:00.0(no nodes),0000:03:00.0",
			"pools " + i915 + "=0000:01:00.0,0000:02:00.0(unhealthy) " + xe + "=0000:03:00.0",
		}},
		{"still unbound on the next pass", func() {}, []string{
			"specs 0000:01:00.0,0000:02:00.0(no nodes),0000:03:00.0",
			"pools " + i915 + "=0000:01:00.0,0000:02:00.0(unhealthy) " + xe + "=0000:03:00.0",
		}},
		{"rebind: healthy again", func() { host.plug(b) }, []string{
			"specs 0000:01:00.0,0000:02:00.0,0000:03:00.0",
			"pools " + i915 + "=0000:01:00.0,0000:02:00.0 " + xe + "=0000:03:00.0",
		}},
		{"unbind then unplug: list first, then spec", func() { host.unbind(c.ID) }, []string{
			"specs 0000:01:00.0,0000:02:00.0,0000:03:00.0(no nodes)",
			"pools " + i915 + "=0000:01:00.0,0000:02:00.0 " + xe + "=0000:03:00.0(unhealthy)",
		}},
		{"unplugged", func() { host.unplug(c) }, []string{
			"specs 0000:01:00.0,0000:02:00.0,0000:03:00.0(no nodes)",
			"pools " + i915 + "=0000:01:00.0,0000:02:00.0",
			"specs 0000:01:00.0,0000:02:00.0",
		}},
		{"surprise removal of a bound card", func() { host.unplug(a) }, []string{
			"specs 0000:01:00.0,0000:02:00.0",
			"pools " + i915 + "=0000:02:00.0",
			"specs 0000:02:00.0",
		}},
	}
	for _, s := range steps {
		s.change()
		require.NoError(t, r.Reconcile("test"), s.name)
		require.Equal(t, s.want, rec.take(), s.name)
	}
}

func TestReconcileSpecFailure(t *testing.T) {
	r, host, rec := newTestReconciler(t, config.Default())
	a, b := gpu("0000:01:00.0", "i915", 0), gpu("0000:02:00.0", "i915", 1)
	host.plug(a)
	require.NoError(t, r.Reconcile("startup"))
	rec.take()

	// b's spec may be missing: b is not listed, a stays.
	host.plug(b)
	rec.specErr = errors.New("disk full")
	err := r.Reconcile("inotify")
	require.ErrorContains(t, err, "write CDI specs: disk full")
	require.Equal(t, []string{
		"specs 0000:01:00.0,0000:02:00.0",
		"pools dri-cdi.dev/i915=0000:01:00.0",
	}, rec.take())
	require.Equal(t, []string{a.ID}, r.Advertised())

	// Health changes still reach the lists while specs fail.
	host.unbind(a.ID)
	require.Error(t, r.Reconcile("inotify"))
	require.Equal(t, []string{
		"specs 0000:01:00.0(no nodes),0000:02:00.0",
		"pools dri-cdi.dev/i915=0000:01:00.0(unhealthy)",
	}, rec.take())

	rec.specErr = nil
	host.plug(a)
	requirePass(t, r, rec, "retry",
		"specs 0000:01:00.0,0000:02:00.0",
		"pools dri-cdi.dev/i915=0000:01:00.0,0000:02:00.0",
	)
}

// A card whose spec could not be written (a full or read-only spec dir:
// cdi.SyncError.Stale) is listed Unhealthy while bound, so no new
// container gets it; /readyz says why; the next good pass heals both.
func TestReconcileStaleSpecIsUnhealthy(t *testing.T) {
	r, host, rec := newTestReconciler(t, config.Default())
	a, b := gpu("0000:01:00.0", "i915", 0), gpu("0000:02:00.0", "i915", 1)
	host.plug(a)
	host.plug(b)
	require.NoError(t, r.Reconcile("startup"))
	rec.take()
	require.Empty(t, r.SpecWarnings())

	rec.specErr = &cdi.SyncError{Stale: []string{a.ID}, Err: errors.New("no space left on device")}
	err := r.Reconcile("inotify")
	require.ErrorContains(t, err, "no space left on device")
	require.Equal(t, []string{
		"specs 0000:01:00.0,0000:02:00.0",
		"pools dri-cdi.dev/i915=0000:01:00.0(unhealthy),0000:02:00.0",
	}, rec.take())
	require.Len(t, r.SpecWarnings(), 1)
	require.Contains(t, r.SpecWarnings()[0], "no space left on device")

	rec.specErr = nil
	requirePass(t, r, rec, "retry",
		"specs 0000:01:00.0,0000:02:00.0",
		"pools dri-cdi.dev/i915=0000:01:00.0,0000:02:00.0",
	)
	require.Empty(t, r.SpecWarnings())
}

func TestReconcileDiscoveryError(t *testing.T) {
	r, host, rec := newTestReconciler(t, config.Default())
	host.plug(gpu("0000:01:00.0", "i915", 0))
	require.NoError(t, r.Reconcile("startup"))
	rec.take()
	host.err = errors.New("permission denied")
	require.ErrorContains(t, r.Reconcile("resync"), "discover cards: permission denied")
	require.Empty(t, rec.take(), "a failed discovery changes nothing")
	require.Equal(t, []string{"0000:01:00.0"}, r.Advertised())
}

func TestReconcileOnlyAdvertisedCardsGetSpecs(t *testing.T) {
	cfg, err := config.Parse([]byte("pools:\n- resource: gpu.intel.com/i915\n  drivers: [i915]\n  replicas: 2\n"))
	require.NoError(t, err)
	r, host, rec := newTestReconciler(t, cfg)
	display := gpu("simple-framebuffer.0", "simple-framebuffer", 0)
	display.RenderNode = nil
	host.plug(display)
	host.plug(gpu("0000:01:00.0", "i915", 1))
	host.plug(gpu("0000:03:00.0", "amdgpu", 2))
	requirePass(t, r, rec, "startup",
		"specs 0000:01:00.0,0000:03:00.0",
		"pools gpu.intel.com/i915=0000:01:00.0 dri-cdi.dev/amdgpu=0000:03:00.0",
	)
}

func TestReconcilePublishErrorIsNotFatal(t *testing.T) {
	r, host, rec := newTestReconciler(t, config.Default())
	rec.pubErr = errors.New("serve dri-cdi.dev/i915: no such directory")
	host.plug(gpu("0000:01:00.0", "i915", 0))
	require.NoError(t, r.Reconcile("startup"))
	require.Equal(t, []string{"0000:01:00.0"}, r.Advertised())
}

func TestReconcileLogsSkippedOnce(t *testing.T) {
	r, host, _ := newTestReconciler(t, config.Default())
	l, hook := logtest.NewNullLogger()
	r.log = logrus.NewEntry(l)
	warned := func() int {
		n := 0
		for _, e := range hook.AllEntries() {
			if e.Message == "DRM entry skipped" {
				n++
			}
		}
		return n
	}
	host.skip = []error{errors.New("/sys/class/drm/card3: dev is garbage")}
	require.NoError(t, r.Reconcile("startup"))
	require.NoError(t, r.Reconcile("resync"))
	require.Equal(t, 1, warned())
	host.skip = append(host.skip, errors.New("/sys/class/drm/card4: no device link"))
	require.NoError(t, r.Reconcile("resync"))
	require.Equal(t, 3, warned())
}
