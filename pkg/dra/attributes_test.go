package dra

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
)

// The PCIe root is read from the /sys/bus/pci/devices link, and only a
// link that leads under devices/pci* to the device itself gives one.
func TestPCIeRoot(t *testing.T) {
	const addr = "0000:03:00.0"
	for name, tc := range map[string]struct {
		target, want, err string
	}{
		"root port":    {target: "../../../devices/pci0000:00/0000:00:01.0/0000:03:00.0", want: "pci0000:00"},
		"domain 1":     {target: "../../../devices/pci0001:40/0001:40:01.0/0000:03:00.0", want: "pci0001:40"},
		"platform":     {target: "../../../devices/platform/soc/0000:03:00.0", err: "not under devices/pci*"},
		"another":      {target: "../../../devices/pci0000:00/0000:00:02.0", err: "not the device 0000:03:00.0"},
		"absolute":     {target: "/sys/devices/pci0000:00/0000:03:00.0", err: "absolute path"},
		"out of sysfs": {target: "../../../../../etc/0000:03:00.0", err: "not under devices/pci*"},
		"missing link": {err: "no such file"},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "bus", "pci", "devices")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			if tc.target != "" {
				require.NoError(t, os.Symlink(tc.target, filepath.Join(dir, addr)))
			}
			got, err := pcieRoot(root, addr)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestStandardAttributes(t *testing.T) {
	attrs := map[draapi.QualifiedName]draapi.DeviceAttribute{}
	problems := standardAttributes(attrs, "card", "0000:3:00.0", 2000, t.TempDir())
	require.Len(t, problems, 2)
	require.ErrorContains(t, problems[0], `card card: PCI address "0000:3:00.0" is not of the form dddd:bb:dd.f`)
	require.ErrorContains(t, problems[1], "card card: NUMA node 2000 is out of range (0 to 1023)")
	require.Empty(t, attrs)
	problems = standardAttributes(attrs, "card", "", 1, "")
	require.Empty(t, problems)
	require.Equal(t, int64(1), *attrs[AttrNUMANode].IntValue)
}
