package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/config"
)

// pciDevice creates <sysfs>/devices/.../<id> and the bus link to it.
func pciDevice(t *testing.T, sysfs, id string) string {
	t.Helper()
	dev := filepath.Join(sysfs, "devices", "pci0000:00", id)
	require.NoError(t, os.MkdirAll(dev, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(sysfs, "bus", "pci", "devices"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join("..", "..", "..", "devices", "pci0000:00", id), filepath.Join(sysfs, "bus", "pci", "devices", id)))
	real, err := filepath.EvalSymlinks(dev)
	require.NoError(t, err)
	return real
}

// An agent that starts while a card the kubelet allocated is unbound
// lists it Unhealthy under the resource it was allocated from, with a spec
// without nodes, and Healthy once it is back; a card whose device is gone
// and cards of resources not served are left alone.
func TestSeedUnboundCardAtStart(t *testing.T) {
	r, host, rec := newTestReconciler(t, config.Default())
	sysfs := t.TempDir()
	x := gpu("0000:01:00.0", "i915", 0)
	y := gpu("0000:02:00.0", "i915", 1)
	x.SysfsPath = pciDevice(t, sysfs, x.ID)
	// What the device plugin's backend reads from the kubelet's
	// checkpoint (deviceplugin's TestCardsInUseFromTheKubeletCheckpoint).
	held := map[string]string{x.ID: "dri-cdi.dev/i915", "0000:09:00.0": "dri-cdi.dev/i915"} // 09: its device is gone
	host.plug(y)
	host.sysfs[x.SysfsPath] = true

	seeded := seed(t, r, held, sysfs)
	require.Equal(t, []string{x.ID}, seeded)

	requirePass(t, r, rec, "startup",
		"specs 0000:01:00.0(no nodes),0000:02:00.0",
		"pools dri-cdi.dev/i915=0000:01:00.0(unhealthy),0000:02:00.0",
	)
	require.Equal(t, []string{x.ID}, r.Unhealthy())

	// It comes back with its own nodes: Healthy, spec from its nodes.
	host.plug(x)
	requirePass(t, r, rec, "uevent",
		"specs 0000:01:00.0,0000:02:00.0",
		"pools dri-cdi.dev/i915=0000:01:00.0,0000:02:00.0",
	)
	require.Empty(t, r.Unhealthy())
}

// The seeded card's resource gets a pool even when no card of it is
// present, and the card leaves when its device goes.
func TestSeedUnboundAloneAndRemoved(t *testing.T) {
	r, host, rec := newTestReconciler(t, config.Default())
	sysfs := t.TempDir()
	id := "0000:01:00.0"
	path := pciDevice(t, sysfs, id)
	host.sysfs[path] = true

	seed(t, r, map[string]string{id: "dri-cdi.dev/xe"}, sysfs)
	requirePass(t, r, rec, "startup",
		"specs 0000:01:00.0(no nodes)",
		"pools dri-cdi.dev/xe=0000:01:00.0(unhealthy)",
	)

	delete(host.sysfs, path)
	requirePass(t, r, rec, "uevent",
		"specs 0000:01:00.0(no nodes)",
		"pools ",
		"specs ",
	)
}

// seed seeds r with held, the cards in use a backend reports, as Run
// does; every held card names a served resource.
func seed(t *testing.T, r *Reconciler, held map[string]string, sysfs string) []string {
	t.Helper()
	seeded, unseeded := r.SeedUnbound(held, sysfs)
	require.Empty(t, unseeded)
	return seeded
}

// Of the held cards, those of an unknown resource or one the config does
// not serve are returned, not seeded; malformed IDs and cards without a
// sysfs device are ignored.
func TestSeedUnboundFilters(t *testing.T) {
	r, host, rec := newTestReconciler(t, config.Default())
	sysfs := t.TempDir()
	for _, id := range []string{"0000:01:00.0", "0000:02:00.0", "0000:03:00.0"} {
		host.sysfs[pciDevice(t, sysfs, id)] = true
	}
	seeded, unseeded := r.SeedUnbound(map[string]string{
		"0000:01:00.0": "dri-cdi.dev/i915",
		"0000:02:00.0": "",                    // resource not recorded
		"0000:03:00.0": "example.com/foreign", // not served
		"0000:09:00.0": "dri-cdi.dev/i915",    // no sysfs device
		"../../../devices/pci0000:00/0000:03:00.0": "dri-cdi.dev/i915", // not a card ID
	}, sysfs)
	require.Equal(t, []string{"0000:01:00.0"}, seeded)
	require.Equal(t, []string{"0000:02:00.0", "0000:03:00.0"}, unseeded)
	requirePass(t, r, rec, "startup",
		"specs 0000:01:00.0(no nodes)",
		"pools dri-cdi.dev/i915=0000:01:00.0(unhealthy)",
	)
}
