// Command runc-rig stands in for runc where the test bed needs to adapt a
// container's OCI spec to the host, and only there; the harness probes the
// host and writes what to adapt into runc-rig.json next to this binary:
//
//   - clampOOMScoreAdj: the host refuses a negative oom_score_adj (writing
//     one fails with EIO). kubelet asks for -998 for pod sandboxes, which
//     runc then cannot apply, so a negative process.oomScoreAdj becomes 0.
//   - dropControllers: the cgroup v2 root the container runs under does not
//     offer these controllers (on a hybrid host, cpu, memory and pids stay
//     bound to the v1 hierarchies), so runc could not write their limits.
//     The limits of exactly those controllers are left out of
//     linux.resources: their sections (cpu shares and quota for "cpu",
//     cpus and mems for "cpuset", memory, pids, hugepageLimits for
//     "hugetlb", blockIO for "io", rdma) and the linux.resources.unified
//     keys of the controller ("memory.oom.group" for "memory"). The device
//     rules (linux.resources.devices) are never touched: they are what the
//     tests measure.
//
// For `runc create` and `runc run` it rewrites the bundle's config.json,
// then execs the real runc, which must sit next to this binary as
// runc.real. Every other call is passed through as is.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ConfigName is the adaptations file next to the binary.
const ConfigName = "runc-rig.json"

// Config says which adaptations this host needs.
type Config struct {
	ClampOOMScoreAdj bool     `json:"clampOOMScoreAdj"`
	DropControllers  []string `json:"dropControllers"`
}

func main() {
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	dir := filepath.Dir(self)
	real := filepath.Join(dir, "runc.real")
	if bundle := bundleArg(os.Args[1:]); bundle != "" {
		cfg, err := loadConfig(filepath.Join(dir, ConfigName))
		if err != nil {
			fail(err)
		}
		if err := rewrite(filepath.Join(bundle, "config.json"), cfg); err != nil {
			fail(err)
		}
	}
	args := append([]string{real}, os.Args[1:]...)
	fail(syscall.Exec(real, args, os.Environ()))
}

// loadConfig reads the adaptations; no file means none.
func loadConfig(path string) (Config, error) {
	var cfg Config
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, err
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return cfg, fmt.Errorf("parse %s: %w", path, err)
	}
	return cfg, nil
}

// bundleArg returns the --bundle/-b value of a create or run command.
func bundleArg(args []string) string {
	isCreate := false
	bundle := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "create" || a == "run":
			isCreate = true
		case a == "--bundle" || a == "-b":
			if i+1 < len(args) {
				bundle = args[i+1]
				i++
			}
		case strings.HasPrefix(a, "--bundle="):
			bundle = strings.TrimPrefix(a, "--bundle=")
		}
	}
	if !isCreate {
		return ""
	}
	if bundle == "" {
		bundle = "."
	}
	return bundle
}

// rewrite applies cfg to the OCI spec at path, in place.
func rewrite(path string, cfg Config) error {
	if !cfg.ClampOOMScoreAdj && len(cfg.DropControllers) == 0 {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read OCI spec %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var spec map[string]any
	if err := dec.Decode(&spec); err != nil {
		return fmt.Errorf("parse OCI spec %s: %w", path, err)
	}
	changed := false
	if cfg.ClampOOMScoreAdj {
		changed = clampOOMScoreAdj(spec) || changed
	}
	for _, c := range cfg.DropControllers {
		changed = dropController(spec, c) || changed
	}
	if !changed {
		return nil
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode OCI spec %s: %w", path, err)
	}
	tmp := path + ".rig"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return fmt.Errorf("write OCI spec %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace OCI spec %s: %w", path, err)
	}
	return nil
}

// clampOOMScoreAdj sets a negative process.oomScoreAdj to 0.
func clampOOMScoreAdj(spec map[string]any) bool {
	proc, ok := spec["process"].(map[string]any)
	if !ok {
		return false
	}
	n, ok := proc["oomScoreAdj"].(json.Number)
	if !ok {
		return false
	}
	if v, err := n.Int64(); err != nil || v >= 0 {
		return false
	}
	proc["oomScoreAdj"] = 0
	return true
}

// controllerFields are the linux.resources fields each cgroup v2
// controller enforces; cpu's fields share the "cpu" object with
// cpuset's.
var controllerFields = map[string][]string{
	"memory":  {"memory"},
	"pids":    {"pids"},
	"hugetlb": {"hugepageLimits"},
	"io":      {"blockIO"},
	"rdma":    {"rdma"},
}

var cpuFields = map[string][]string{
	"cpu":    {"shares", "quota", "burst", "period", "realtimeRuntime", "realtimePeriod", "idle"},
	"cpuset": {"cpus", "mems"},
}

// dropController removes the limits of controller from
// linux.resources, and reports whether there were any.
func dropController(spec map[string]any, controller string) bool {
	linux, _ := spec["linux"].(map[string]any)
	res, _ := linux["resources"].(map[string]any)
	if res == nil {
		return false
	}
	changed := false
	for _, f := range controllerFields[controller] {
		if _, ok := res[f]; ok {
			delete(res, f)
			changed = true
		}
	}
	if cpu, ok := res["cpu"].(map[string]any); ok {
		for _, f := range cpuFields[controller] {
			if _, ok := cpu[f]; ok {
				delete(cpu, f)
				changed = true
			}
		}
		if len(cpu) == 0 {
			delete(res, "cpu")
		}
	}
	if unified, ok := res["unified"].(map[string]any); ok {
		for k := range unified {
			if strings.HasPrefix(k, controller+".") {
				delete(unified, k)
				changed = true
			}
		}
		if len(unified) == 0 {
			delete(res, "unified")
		}
	}
	return changed
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "runc-rig: %v\n", err)
	os.Exit(1)
}
