package usage

import (
	"path"
	"strconv"
	"strings"
	"time"
)

// FakeDevOf makes r read device numbers from the fd link's target name
// instead of stat: /dev/dri/renderD<N> is 226:N, /dev/dri/card<N> is
// 226:N, /dev/accel/accel<N> is 261:N. A fake tree cannot hold device
// nodes without root.
func FakeDevOf(r *Reader) {
	r.devOf = func(link string) (uint32, uint32, bool) {
		target, err := readlink(link)
		if err != nil {
			return 0, 0, false
		}
		base := path.Base(target)
		for prefix, major := range map[string]uint32{"renderD": MajorDRM, "card": MajorDRM, "accel": MajorAccel} {
			if rest, ok := strings.CutPrefix(base, prefix); ok && strings.HasPrefix(target, "/dev/") {
				n, err := strconv.ParseUint(rest, 10, 32)
				return major, uint32(n), err == nil
			}
		}
		return 0, 0, false
	}
}

// FakeMonitor gives m's reader FakeDevOf and m the clock now.
func FakeMonitor(m *Monitor, now func() time.Time) {
	FakeDevOf(m.reader)
	m.now = now
}
