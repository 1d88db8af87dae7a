package kubelettest

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// AcceptedConns counts the connections accepted on unix sockets whose
// path starts with prefix, in this network namespace: /proc/net/unix
// lists an accepted socket, connected (state 03), with the path its
// listener is bound to, and the connecting side without one. Tests use it
// to see which connections to a plugin's servers are still open.
func AcceptedConns(prefix string) (int, error) {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 8 && fields[5] == "03" && strings.HasPrefix(fields[7], prefix) {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read /proc/net/unix: %w", err)
	}
	return n, nil
}
