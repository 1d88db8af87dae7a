// Command bench measures what dri-cdi costs on a node, side by side in
// one run: the NRI plugin on the container path through containerd, its
// handler, Allocate, discovery and spec writing, hotplug and memory. It
// prints a table and writes the figures to a JSON file; see
// docs/performance.md. It exits non-zero only when a measurement could not
// be taken, never because a goal was missed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	cfg := DefaultConfig()
	scale := 1.0
	flag.StringVar(&cfg.Out, "out", "", "JSON file to write (default _output/bench.json in the repository)")
	flag.StringVar(&cfg.Dir, "dir", cfg.Dir, "base directory (tmpfs) for fake DRM trees and spec files")
	flag.StringVar(&cfg.BinDir, "bin", "", "directory holding dri-cdi-agent and dri-cdi-nri (default bin/ in the repository)")
	flag.IntVar(&cfg.Containers, "containers", cfg.Containers, "containers per arm of each container comparison")
	flag.IntVar(&cfg.Block, "block", cfg.Block, "containers per arm between two toggles of the NRI plugin")
	only := flag.String("only", "", "run only these steps, comma-separated: "+strings.Join(stepIDs(), ", ")+" (default: all)")
	flag.Float64Var(&scale, "scale", scale, "multiply every repetition count (trial runs)")
	flag.BoolVar(&cfg.SkipContainerd, "skip-containerd", false, "leave out the container path through containerd (and the cluster)")
	flag.BoolVar(&cfg.SkipCluster, "skip-cluster", false, "leave out the keys measured on a real cluster (DRA vs device plugin pod start, DRA prepare and start to slice, the scheduler's placement of shares)")
	clusterOnly := flag.Bool("cluster-only", false, "measure only the keys on a real cluster: -only "+stepCluster+","+stepSchedule)
	flag.Parse()
	if *only != "" {
		cfg.Only = strings.Split(*only, ",")
	}
	if *clusterOnly {
		cfg.Only = []string{stepCluster, stepSchedule}
	}
	if scale != 1 {
		cfg.Scale(scale)
	}
	if err := run(context.Background(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg Config) error {
	if err := cfg.resolve(); err != nil {
		return err
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		return err
	}
	if err := rep.WriteTable(os.Stdout); err != nil {
		return err
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cfg.Out, append(data, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", cfg.Out)
	if f := rep.Failures(); len(f) > 0 {
		return fmt.Errorf("%d measurements failed:\n  %s", len(f), strings.Join(f, "\n  "))
	}
	return nil
}
