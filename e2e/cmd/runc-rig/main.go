// Command runc-oom-clamp stands in for runc on hosts that refuse a
// negative oom_score_adj (writing one fails with EIO). kubelet asks for
// -998 for pod sandboxes, which runc then cannot apply. For `runc create`
// and `runc run` it rewrites a negative process.oomScoreAdj in the
// bundle's config.json to 0, then execs the real runc, which must sit next
// to this binary as runc.real. Every other call is passed through as is.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	real := filepath.Join(filepath.Dir(self), "runc.real")
	if bundle := bundleArg(os.Args[1:]); bundle != "" {
		if err := clamp(filepath.Join(bundle, "config.json")); err != nil {
			fail(err)
		}
	}
	args := append([]string{real}, os.Args[1:]...)
	fail(syscall.Exec(real, args, os.Environ()))
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

func clamp(path string) error {
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
	proc, ok := spec["process"].(map[string]any)
	if !ok {
		return nil
	}
	n, ok := proc["oomScoreAdj"].(json.Number)
	if !ok {
		return nil
	}
	if v, err := n.Int64(); err != nil || v >= 0 {
		return nil
	}
	proc["oomScoreAdj"] = 0
	out, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode OCI spec %s: %w", path, err)
	}
	tmp := path + ".clamp"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return fmt.Errorf("write OCI spec %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace OCI spec %s: %w", path, err)
	}
	return nil
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "runc-oom-clamp: %v\n", err)
	os.Exit(1)
}
