package drm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// parseCase is one input of a sysfs value parser and the value it must
// give; a case without ok must be rejected with the parser's sentinel.
type parseCase[T any] struct {
	in   string
	want T
	ok   bool
}

// testParser runs the cases of parse, whose errors wrap bad and quote the
// input they reject.
func testParser[T any](t *testing.T, parse func(string) (T, error), bad error, tests map[string]parseCase[T]) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parse(tc.in)
			if !tc.ok {
				require.ErrorIs(t, err, bad)
				require.ErrorContains(t, err, fmt.Sprintf("%q", tc.in))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// testFunc checks f against a table of input -> result.
func testFunc[T any](t *testing.T, f func(string) T, tests map[string]T) {
	t.Helper()
	for in, want := range tests {
		t.Run(in, func(t *testing.T) {
			require.Equal(t, want, f(in))
		})
	}
}

// fuzzParser fuzzes parse from seeds: whatever it rejects must wrap bad,
// whatever it accepts must pass check.
func fuzzParser[T any](f *testing.F, seeds []string, parse func(string) (T, error), bad error, check func(t *testing.T, in string, got T)) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parse(s)
		if err != nil {
			require.ErrorIs(t, err, bad)
			return
		}
		check(t, s, got)
	})
}

// dev is ParseDev with its two numbers as one value, for the helpers.
func dev(s string) ([2]uint32, error) {
	major, minor, err := ParseDev(s)
	return [2]uint32{major, minor}, err
}

func TestParseDev(t *testing.T) {
	testParser(t, dev, ErrBadDev, map[string]parseCase[[2]uint32]{
		"card":             {in: "226:1\n", want: [2]uint32{226, 1}, ok: true},
		"render":           {in: "226:128\n", want: [2]uint32{226, 128}, ok: true},
		"no newline":       {in: "226:0", want: [2]uint32{226, 0}, ok: true},
		"max":              {in: "4294967295:4294967295\n", want: [2]uint32{1<<32 - 1, 1<<32 - 1}, ok: true},
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
	})
}

func TestParseHexID(t *testing.T) {
	testParser(t, ParseHexID, ErrBadHexID, map[string]parseCase[string]{
		"intel":         {in: "0x8086\n", want: "8086", ok: true},
		"upper case":    {in: "0x744C\n", want: "744c", ok: true},
		"short":         {in: "0x10\n", want: "0010", ok: true},
		"no newline":    {in: "0x1002", want: "1002", ok: true},
		"no prefix":     {in: "8086\n"},
		"upper prefix":  {in: "0X8086\n"},
		"prefix only":   {in: "0x\n"},
		"too long":      {in: "0x18086\n"},
		"not hex":       {in: "0xzz\n"},
		"space":         {in: "0x 808\n"},
		"sign":          {in: "0x-808\n"},
		"empty":         {in: ""},
		"class is long": {in: "0x030000\n"},
	})
}

func TestParseNUMANode(t *testing.T) {
	testParser(t, ParseNUMANode, ErrBadNUMA, map[string]parseCase[int]{
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
	})
}

func TestLinkName(t *testing.T) {
	testParser(t, LinkName, ErrBadLink, map[string]parseCase[string]{
		"driver":          {in: "../../../bus/pci/drivers/i915", want: "i915", ok: true},
		"subsystem":       {in: "../../../bus/pci", want: "pci", ok: true},
		"trailing slash":  {in: "../../bus/platform/", want: "platform", ok: true},
		"absolute":        {in: "/sys/bus/virtio/drivers/virtio_gpu", want: "virtio_gpu", ok: true},
		"bare name":       {in: "amdgpu", want: "amdgpu", ok: true},
		"dash and dot":    {in: "../drivers/simple-framebuffer", want: "simple-framebuffer", ok: true},
		"empty":           {in: ""},
		"dot":             {in: "."},
		"dotdot":          {in: ".."},
		"ends in dotdot":  {in: "../../.."},
		"root":            {in: "/"},
		"cleans to dot":   {in: "a/.."},
		"nul":             {in: "dri\x00ver"},
		"ends in dot dir": {in: "drivers/i915/.", want: "i915", ok: true},
	})
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
	testFunc(t, classifyEntry, tests)
}

func TestClassifyAccel(t *testing.T) {
	tests := map[string]nodeKind{
		"accel0":           kindAccel,
		"accel17":          kindAccel,
		"accel_controlD0":  kindControl,
		"accel_controlD12": kindControl,
		"accel":            kindOther,
		"accel01":          kindOther,
		"accel-1":          kindOther,
		"accel_controlD":   kindOther,
		"accel_controlDx":  kindOther,
		"accel_control0":   kindOther,
		"card0":            kindOther,
		"renderD128":       kindOther,
		"Accel0":           kindOther,
	}
	testFunc(t, classifyAccel, tests)
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
	testFunc(t, isPCIAddress, tests)
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
	testFunc(t, platformDriver, tests)
}

func FuzzParseDev(f *testing.F) {
	seeds := []string{"226:1\n", "226:128\n", "0:0", "garbage", "226:", ":", "4294967296:1\n"}
	fuzzParser(f, seeds, dev, ErrBadDev, func(t *testing.T, s string, got [2]uint32) {
		// Only the canonical form, optionally with one newline, parses.
		require.Equal(t, strings.TrimSuffix(s, "\n"), fmt.Sprintf("%d:%d", got[0], got[1]))
	})
}

func FuzzParseHexID(f *testing.F) {
	seeds := []string{"0x8086\n", "0x744C\n", "0x\n", "8086", "0x10000\n"}
	fuzzParser(f, seeds, ParseHexID, ErrBadHexID, func(t *testing.T, s string, id string) {
		require.Len(t, id, 4)
		require.True(t, isLowerHex(id), id)
		v := strings.TrimPrefix(strings.TrimSuffix(s, "\n"), "0x")
		require.Equal(t, fmt.Sprintf("%04s", strings.ToLower(v)), id)
	})
}

func FuzzParseNUMANode(f *testing.F) {
	seeds := []string{"-1\n", "0\n", "3", "-2", "x"}
	fuzzParser(f, seeds, ParseNUMANode, ErrBadNUMA, func(t *testing.T, s string, n int) {
		require.GreaterOrEqual(t, n, -1)
		require.Equal(t, strings.TrimSuffix(s, "\n"), fmt.Sprint(n))
	})
}

func FuzzLinkName(f *testing.F) {
	seeds := []string{"../../../bus/pci/drivers/i915", "/", "..", "", "a/..", "x/"}
	fuzzParser(f, seeds, LinkName, ErrBadLink, func(t *testing.T, s string, name string) {
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
