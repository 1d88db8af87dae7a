package drm_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

func TestCharDeviceCard(t *testing.T) {
	sys := t.TempDir()
	char := filepath.Join(sys, "dev", "char")
	require.NoError(t, os.MkdirAll(char, 0o755))
	for name, target := range map[string]string{
		"226:128": "../../devices/pci0000:00/0000:00:02.0/drm/renderD128",
		"226:0":   "../../devices/pci0000:00/0000:00:02.0/drm/card0",
		"226:129": "../../devices/pci0000:00/0000:00:03.0/virtio3/drm/renderD129",
		"226:1":   "../../devices/platform/vkms/drm/card1",
		"261:0":   "../../devices/pci0000:00/0000:00:0b.0/accel/accel0",
		"4:1":     "../../devices/virtual/tty/tty1",
		"508:0":   "../../devices/pci0000:00/0000:00:0c.0/accel/accel_controlD0",
		"261:1":   "../../devices/platform/fdab0000.npu/accel/accel1",
		"226:9":   "../../drm/card9",
	} {
		require.NoError(t, os.Symlink(target, filepath.Join(char, name)))
	}
	for name, tc := range map[string]struct {
		major, minor uint32
		want, err    string
	}{
		"pci render node": {226, 128, "0000:00:02.0", ""},
		"pci card node":   {226, 0, "0000:00:02.0", ""},
		"virtio":          {226, 129, "0000:00:03.0", ""},
		"platform":        {226, 1, "vkms", ""},
		"accel":           {261, 0, "0000:00:0b.0", ""},
		"platform accel":  {261, 1, "fdab0000.npu", ""},
		"not DRM":         {4, 1, "", "char device 4:1 is ../../devices/virtual/tty/tty1, not a DRM or accel node"},
		"accel control":   {508, 0, "", "accel_controlD0: accel control node, not served"},
		"no parent":       {226, 9, "", "no parent device"},
		"no such device":  {226, 130, "", "char device 226:130"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := drm.CharDeviceCard(sys, tc.major, tc.minor)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := drm.CharDeviceCard(sys, 226, 130)
	require.ErrorIs(t, err, fs.ErrNotExist)
}
