package kubelettest

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// UnixSockets counts, in this network namespace, the unix sockets whose
// path starts with prefix: those listening, and the connections accepted
// on them. /proc/net/unix lists a listener (flag __SO_ACCEPTCON, state
// 01) and every accepted connection (state 03) with the listener's path,
// even once the file is gone, and the connecting side without a path.
// Tests use it to see which servers of a plugin, and which connections
// to them, are still open.
func UnixSockets(prefix string) (listening, accepted int, err error) {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Num RefCount Protocol Flags Type St Inode Path
		fields := strings.Fields(sc.Text())
		if len(fields) != 8 || !strings.HasPrefix(fields[7], prefix) {
			continue
		}
		switch {
		case fields[3] == "00010000" && fields[5] == "01":
			listening++
		case fields[5] == "03":
			accepted++
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("read /proc/net/unix: %w", err)
	}
	return listening, accepted, nil
}
