package dra

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dri-cdi/dri-cdi/pkg/config"
)

func TestDeviceName(t *testing.T) {
	for name, tc := range map[string]struct {
		id, want, prefix string
	}{
		"pci":                  {id: "0000:00:02.0", want: "pci-0000-00-02-0"},
		"pci domain and bus":   {id: "10de:af:1f.7", want: "pci-10de-af-1f-7"},
		"platform label":       {id: "vkms", want: "vkms"},
		"virtio label":         {id: "virtio1", want: "virtio1"},
		"platform with dot":    {id: "simple-framebuffer.0", prefix: "simple-framebuffer-0-x"},
		"uppercase":            {id: "VKMS", prefix: "vkms-x"},
		"pci uppercase":        {id: "0000:00:0A.0", prefix: "0000-00-0a-0-x"},
		"looks like pci form":  {id: "pci-0000-00-02-0", prefix: "pci-0000-00-02-0-x"},
		"looks like hash form": {id: "vkms-x0123abcd", prefix: "vkms-x0123abcd-x"},
		"only symbols":         {id: ":::", prefix: "card-x"},
		"empty":                {id: "", prefix: "card-x"},
		"too long":             {id: strings.Repeat("a", 64), prefix: strings.Repeat("a", 53) + "-x"},
		"trailing dash":        {id: "gpu-", prefix: "gpu-x"},
	} {
		t.Run(name, func(t *testing.T) {
			got := DeviceName(tc.id)
			require.Empty(t, validation.IsDNS1123Label(got), "%q is no DNS label", got)
			if tc.want != "" {
				require.Equal(t, tc.want, got)
			} else {
				require.True(t, strings.HasPrefix(got, tc.prefix), "%q does not start with %q", got, tc.prefix)
				require.Regexp(t, `-x[0-9a-f]{8}$`, got)
			}
			require.Equal(t, got, DeviceName(tc.id), "not stable")
		})
	}
}

// IDs that read alike after sanitising, and IDs that have the generated
// forms, get distinct names.
func TestDeviceNameCollisions(t *testing.T) {
	ids := []string{
		"0000:00:02.0", "pci-0000-00-02-0", "0000-00-02-0", "0000.00.02.0",
		"simple-framebuffer.0", "simple-framebuffer-0", "simple_framebuffer.0", "Simple-Framebuffer.0",
		"vkms", "VKMS", "vkms-x0123abcd", "", ":", "-", strings.Repeat("a", 64), strings.Repeat("a", 65),
	}
	seen := map[string]string{}
	for _, id := range ids {
		n := DeviceName(id)
		prev, dup := seen[n]
		require.False(t, dup, "%q and %q both map to %q", prev, id, n)
		seen[n] = id
	}
}

func FuzzDeviceName(f *testing.F) {
	for _, s := range []string{"0000:00:02.0", "vkms", "simple-framebuffer.0", "pci-0000-00-02-0", "a-x01234567", ""} {
		f.Add(s, s+".")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		na, nb := DeviceName(a), DeviceName(b)
		if errs := validation.IsDNS1123Label(na); len(errs) > 0 {
			t.Fatalf("DeviceName(%q) = %q: %v", a, na, errs)
		}
		if a != b && na == nb {
			t.Fatalf("DeviceName(%q) = DeviceName(%q) = %q", a, b, na)
		}
	})
}

// The names other binaries read from pkg/config are the plugin's.
func TestSharedNamesAreThePlugins(t *testing.T) {
	require.Equal(t, DefaultRegistrarDir, config.DRARegistrarDir)
	require.Equal(t, config.DRARegistrationSocket, registrationSocket(config.DRARegistrarDir, ""))
	require.Equal(t, config.DefaultPoolPrefix, DriverName+"/")
}
