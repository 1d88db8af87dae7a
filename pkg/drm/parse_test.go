package drm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseDev(t *testing.T) {
	tests := map[string]struct {
		in           string
		major, minor uint32
		ok           bool
	}{
		"card":             {in: "226:1\n", major: 226, minor: 1, ok: true},
		"render":           {in: "226:128\n", major: 226, minor: 128, ok: true},
		"no newline":       {in: "226:0", major: 226, minor: 0, ok: true},
		"max":              {in: "4294967295:4294967295\n", major: 1<<32 - 1, minor: 1<<32 - 1, ok: true},
		"empty":            {in: ""},
		"newline only":     {in: "\n"},
		"no colon":         {in: "226\n"},
		"two colons":       {in: "226:1:2\n"},
		"empty minor":      {in: "226:\n"},
		"empty major":      {in: ":1\n"},
		"sign":             {in: "+226:1\n"},
		"negative":         {in: "226:-1\n"},
		"space":            {in: "226: 1\n"},
		"two newlines":     {in: "226:1\n\n"},
		"leading zero":     {in: "226:01\n"},
		"hex":              {in: "0xe2:1\n"},
		"overflow":         {in: "226:4294967296\n"},
		"garbage":          {in: "garbage\n"},
		"trailing garbage": {in: "226:1x\n"},
		"crlf":             {in: "226:1\r\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			major, minor, err := ParseDev(tc.in)
			if !tc.ok {
				require.ErrorIs(t, err, ErrBadDev)
				require.ErrorContains(t, err, fmt.Sprintf("%q", tc.in))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.major, major)
			require.Equal(t, tc.minor, minor)
		})
	}
}

func TestParseHexID(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"intel":         {in: "0x8086\n", want: "8086"},
		"upper case":    {in: "0x744C\n", want: "744c"},
		"short":         {in: "0x10\n", want: "0010"},
		"no newline":    {in: "0x1002", want: "1002"},
		"no prefix":     {in: "8086\n"},
		"upper prefix":  {in: "0X8086\n"},
		"prefix only":   {in: "0x\n"},
		"too long":      {in: "0x18086\n"},
		"not hex":       {in: "0xzz\n"},
		"space":         {in: "0x 808\n"},
		"sign":          {in: "0x-808\n"},
		"empty":         {in: ""},
		"class is long": {in: "0x030000\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseHexID(tc.in)
			if tc.want == "" {
				require.ErrorIs(t, err, ErrBadHexID)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseNUMANode(t *testing.T) {
	tests := map[string]struct {
		in   string
		want int
		ok   bool
	}{
		"unknown":      {in: "-1\n", want: -1, ok: true},
		"zero":         {in: "0\n", want: 0, ok: true},
		"three":        {in: "3\n", want: 3, ok: true},
		"no newline":   {in: "1", want: 1, ok: true},
		"minus two":    {in: "-2\n"},
		"minus zero":   {in: "-0\n"},
		"huge":         {in: "99999999\n"},
		"empty":        {in: ""},
		"garbage":      {in: "node0\n"},
		"leading zero": {in: "01\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseNUMANode(tc.in)
			if !tc.ok {
				require.ErrorIs(t, err, ErrBadNUMA)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestLinkName(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"driver":          {in: "../../../bus/pci/drivers/i915", want: "i915"},
		"subsystem":       {in: "../../../bus/pci", want: "pci"},
		"trailing slash":  {in: "../../bus/platform/", want: "platform"},
		"absolute":        {in: "/sys/bus/virtio/drivers/virtio_gpu", want: "virtio_gpu"},
		"bare name":       {in: "amdgpu", want: "amdgpu"},
		"dash and dot":    {in: "../drivers/simple-framebuffer", want: "simple-framebuffer"},
		"empty":           {in: ""},
		"dot":             {in: "."},
		"dotdot":          {in: ".."},
		"ends in dotdot":  {in: "../../.."},
		"root":            {in: "/"},
		"cleans to dot":   {in: "a/.."},
		"nul":             {in: "dri\x00ver"},
		"ends in dot dir": {in: "drivers/i915/.", want: "i915"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := LinkName(tc.in)
			if tc.want == "" {
				require.ErrorIs(t, err, ErrBadLink)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestClassifyEntry(t *testing.T) {
	tests := map[string]nodeKind{
		"card0":        kindCard,
		"card15":       kindCard,
		"renderD128":   kindRender,
		"renderD255":   kindRender,
		"card0-DP-1":   kindOther,
		"card1-eDP-1":  kindOther,
		"version":      kindOther,
		"controlD64":   kindOther,
		"card":         kindOther,
		"renderD":      kindOther,
		"card01":       kindOther,
		"cardX":        kindOther,
		"renderD-1":    kindOther,
		"render128":    kindOther,
		"Card0":        kindOther,
		"card0 ":       kindOther,
		"accel0":       kindOther,
		"card99999999": kindCard,
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, want, classifyEntry(name))
		})
	}
}

func TestIsPCIAddress(t *testing.T) {
	tests := map[string]bool{
		"0000:00:02.0":  true,
		"0000:03:00.7":  true,
		"10000:e1:00.0": true,
		"0000:00:02.8":  false,
		"0000:00:2.0":   false,
		"0000:00:02":    false,
		"000:00:02.0":   false,
		"0000:0G:02.0":  false,
		"0000:00:02.0x": false,
		"0000:AB:02.0":  false,
		"pci0000:00":    false,
		"virtio1":       false,
		"vkms":          false,
		"":              false,
	}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			require.Equal(t, want, isPCIAddress(in))
		})
	}
}

func TestPlatformDriver(t *testing.T) {
	tests := map[string]string{
		"vkms":                 "vkms",
		"simple-framebuffer.0": "simple-framebuffer",
		"a003e00.virtio_mmio":  "a003e00.virtio_mmio",
		"foo.12":               "foo",
		".0":                   ".0",
		"bar.":                 "bar.",
	}
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			require.Equal(t, want, platformDriver(in))
		})
	}
}

func FuzzParseDev(f *testing.F) {
	for _, s := range []string{"226:1\n", "226:128\n", "0:0", "garbage", "226:", ":", "4294967296:1\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		major, minor, err := ParseDev(s)
		if err != nil {
			require.ErrorIs(t, err, ErrBadDev)
			return
		}
		// Only the canonical form, optionally with one newline, parses.
		require.Equal(t, strings.TrimSuffix(s, "\n"), fmt.Sprintf("%d:%d", major, minor))
	})
}

func FuzzParseHexID(f *testing.F) {
	for _, s := range []string{"0x8086\n", "0x744C\n", "0x\n", "8086", "0x10000\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseHexID(s)
		if err != nil {
			require.ErrorIs(t, err, ErrBadHexID)
			return
		}
		require.Len(t, id, 4)
		require.True(t, isLowerHex(id), id)
		v := strings.TrimPrefix(strings.TrimSuffix(s, "\n"), "0x")
		require.Equal(t, fmt.Sprintf("%04s", strings.ToLower(v)), id)
	})
}

func FuzzParseNUMANode(f *testing.F) {
	for _, s := range []string{"-1\n", "0\n", "3", "-2", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseNUMANode(s)
		if err != nil {
			require.ErrorIs(t, err, ErrBadNUMA)
			return
		}
		require.GreaterOrEqual(t, n, -1)
		require.Equal(t, strings.TrimSuffix(s, "\n"), fmt.Sprint(n))
	})
}

func FuzzLinkName(f *testing.F) {
	for _, s := range []string{"../../../bus/pci/drivers/i915", "/", "..", "", "a/..", "x/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, err := LinkName(s)
		if err != nil {
			require.ErrorIs(t, err, ErrBadLink)
			return
		}
		require.NotContains(t, name, "/")
		require.NotContains(t, []string{"", ".", ".."}, name)
		require.Contains(t, s, name)
	})
}

func FuzzClassifyEntry(f *testing.F) {
	for _, s := range []string{"card0", "renderD128", "card0-DP-1", "version", "controlD64"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		switch classifyEntry(s) {
		case kindCard:
			n, ok := parseUintStrict(strings.TrimPrefix(s, "card"))
			require.True(t, ok)
			require.Equal(t, s, fmt.Sprintf("card%d", n))
		case kindRender:
			n, ok := parseUintStrict(strings.TrimPrefix(s, "renderD"))
			require.True(t, ok)
			require.Equal(t, s, fmt.Sprintf("renderD%d", n))
		}
	})
}
