package harness

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// runcFilter is in the shape of `bpftool prog dump xlated` of a device
// program runc v1.5.3 generated: a block rule (type 1, any number), c
// 1:3, c 226:128 rw allowed, c 226:129 denied, c 136:* allowed.
const runcFilter = `   0: (61) r2 = *(u32 *)(r1 +0)
   1: (54) w2 &= 65535
   2: (61) r3 = *(u32 *)(r1 +0)
   3: (74) w3 >>= 16
   4: (61) r4 = *(u32 *)(r1 +4)
   5: (61) r5 = *(u32 *)(r1 +8)
   6: (55) if r2 != 0x1 goto pc+5
   7: (bc) w1 = w3
   8: (54) w1 &= 1
   9: (5d) if r1 != r3 goto pc+2
  10: (b4) w0 = 1
  11: (95) exit
  12: (55) if r2 != 0x2 goto pc+4
  13: (55) if r4 != 0x1 goto pc+3
  14: (55) if r5 != 0x3 goto pc+2
  15: (b4) w0 = 1
  16: (95) exit
  17: (55) if r2 != 0x2 goto pc+3
  18: (55) if r4 != 0x88 goto pc+2
  19: (b4) w0 = 1
  20: (95) exit
  21: (55) if r2 != 0x2 goto pc+7
  22: (55) if r4 != 0xe2 goto pc+6
  23: (55) if r5 != 0x80 goto pc+5
  24: (bc) w1 = w3
  25: (54) w1 &= 6
  26: (5d) if r1 != r3 goto pc+2
  27: (b4) w0 = 1
  28: (95) exit
  29: (55) if r2 != 0x2 goto pc+4
  30: (55) if r4 != 0xe2 goto pc+3
  31: (55) if r5 != 0x81 goto pc+2
  32: (b4) w0 = 0
  33: (95) exit
  34: (b4) w0 = 0
  35: (95) exit
`

func TestAllowedChar(t *testing.T) {
	got := allowedChar(runcFilter)
	require.Equal(t, []string{"1:3", "226:128"}, got, "exact char allow rules only: not the block rule, not c 136:*, not the denied c 226:129")
	f := DeviceFilter{AllowedChar: got}
	require.True(t, f.AllowsChar(226, 128))
	require.False(t, f.AllowsChar(226, 129))
	require.True(t, f.AllowsCharMajor(226))
	require.False(t, f.AllowsCharMajor(136), "a wildcard minor is not an exact rule")
	require.Empty(t, allowedChar(""))
}
