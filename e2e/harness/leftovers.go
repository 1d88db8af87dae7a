package harness

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// Leftovers lists what a run of the harness under workDir left on the
// machine: live processes that name it, sit in a node's cgroup or hold a
// node's namespaces (holderEnv: a holder is `sleep infinity` by then, and
// its mounts went with the directories teardown removed), mounts under it,
// the harness's links (dricdi-*), and node cgroups (dri-cdi-e2e-*). A
// clean teardown leaves none. Zombies do not count: this machine's init
// does not reap them.
func Leftovers(workDir string) []string {
	var out []string
	for _, pid := range allPids() {
		if pid == os.Getpid() || zombie(pid) {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		args := strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if strings.Contains(args, workDir+"/") || strings.Contains(string(cg), "/dri-cdi-e2e-") ||
			strings.Contains("\x00"+string(env), "\x00"+holderEnv+"="+workDir+"/") {
			out = append(out, fmt.Sprintf("process %d: %s", pid, args))
		}
	}
	for _, m := range mountsUnder(workDir) {
		out = append(out, "mount "+m)
	}
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			if strings.HasPrefix(i.Name, "dricdi-") {
				out = append(out, "link "+i.Name)
			}
		}
	}
	for _, mp := range cgroupMounts() {
		matches, _ := filepath.Glob(filepath.Join(mp, "dri-cdi-e2e-*"))
		for _, m := range matches {
			out = append(out, "cgroup "+m)
		}
	}
	return out
}

// zombie reports whether pid has exited and waits to be reaped.
func zombie(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(st)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}
