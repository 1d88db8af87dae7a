package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/kubeletcheckpoint"
)

// writeCheckpoint writes a kubelet device manager checkpoint in the
// v1.37 format with the given allocations (resource -> device IDs).
func writeCheckpoint(t *testing.T, dir string, allocs map[string][]string) {
	t.Helper()
	type entry struct {
		PodUID, ContainerName, ResourceName string
		DeviceIDs                           map[string][]string
		AllocResp                           []byte
	}
	var entries []entry
	for res, ids := range allocs {
		entries = append(entries, entry{PodUID: "uid-1", ContainerName: "app", ResourceName: res,
			DeviceIDs: map[string][]string{"-1": ids}, AllocResp: []byte("{}")})
	}
	data := map[string]any{"Data": map[string]any{"PodDeviceEntries": entries, "RegisteredDevices": map[string][]string{}}, "Checksum": 1}
	b, err := jsonMarshal(data)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, kubeletcheckpoint.FileName), b, 0o600))
}

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
	kubelet, sysfs := t.TempDir(), t.TempDir()
	x := gpu("0000:01:00.0", "i915", 0)
	y := gpu("0000:02:00.0", "i915", 1)
	x.SysfsPath = pciDevice(t, sysfs, x.ID)
	writeCheckpoint(t, kubelet, map[string][]string{
		"dri-cdi.dev/i915":    {x.ID, "0000:09:00.0"}, // 09: its device is gone
		"example.com/foreign": {"0000:05:00.0"},
	})
	pciDevice(t, sysfs, "0000:05:00.0")
	host.plug(y)
	host.sysfs[x.SysfsPath] = true

	seeded := seedFromKubelet(t, r, kubelet, sysfs)
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
	kubelet, sysfs := t.TempDir(), t.TempDir()
	id := "0000:01:00.0"
	path := pciDevice(t, sysfs, id)
	writeCheckpoint(t, kubelet, map[string][]string{"dri-cdi.dev/xe": {id + "::1"}})
	host.sysfs[path] = true

	seedFromKubelet(t, r, kubelet, sysfs)
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

// seedFromKubelet seeds r with what the device plugin's backend reads
// from the kubelet's checkpoint in kubelet, as Run does.
func seedFromKubelet(t *testing.T, r *Reconciler, kubelet, sysfs string) []string {
	t.Helper()
	held, err := deviceManager{kubeletDir: kubelet, served: r.cfg.ServesResource}.CardsInUse()
	require.NoError(t, err)
	seeded, unseeded := r.SeedUnbound(held, sysfs)
	require.Empty(t, unseeded, "the kubelet's checkpoint names every card's served resource")
	return seeded
}

func TestSeedUnboundCheckpointErrors(t *testing.T) {
	dir := t.TempDir()
	m := deviceManager{kubeletDir: dir, served: config.Default().ServesResource}
	held, err := m.CardsInUse()
	require.NoError(t, err, "no checkpoint: nothing in use")
	require.Empty(t, held)
	require.NoError(t, os.WriteFile(filepath.Join(dir, kubeletcheckpoint.FileName), []byte("{garbage"), 0o600))
	_, err = m.CardsInUse()
	require.ErrorContains(t, err, "kubelet checkpoint "+filepath.Join(dir, kubeletcheckpoint.FileName))
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

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
