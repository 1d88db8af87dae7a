// Command e2e-summary reads the output of `go test -v` and prints a table
// of every test and subtest with its result and duration. It exits 1 when
// any test failed or was skipped, when no test ran, or when -rc (the
// exit status of go test) is not 0: an e2e scenario that did not run is
// never reported as passed.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

var resultLine = regexp.MustCompile(`^(\s*)--- (PASS|FAIL|SKIP): (\S+) \(([0-9.]+)s\)`)

type result struct {
	name, status, seconds string
	depth                 int
}

func parse(r io.Reader) ([]result, error) {
	var out []result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		m := resultLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		out = append(out, result{name: m[3], status: m[2], seconds: m[4], depth: len(m[1]) / 4})
	}
	return out, sc.Err()
}

func main() {
	rc := flag.Int("rc", 0, "exit status of go test")
	flag.Parse()
	in := io.Reader(os.Stdin)
	if flag.NArg() > 0 {
		f, err := os.Open(flag.Arg(0))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		in = f
	}
	results, err := parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println()
	fmt.Println("== e2e summary")
	width := len("SCENARIO")
	for _, r := range results {
		width = max(width, 2*r.depth+len(r.name))
	}
	fmt.Printf("%-*s  %-6s %10s\n", width, "SCENARIO", "RESULT", "DURATION")
	bad := 0
	for _, r := range results {
		name := strings.Repeat("  ", r.depth) + r.name
		fmt.Printf("%-*s  %-6s %9ss\n", width, name, r.status, r.seconds)
		if r.status != "PASS" {
			bad++
		}
	}
	switch {
	case len(results) == 0:
		fmt.Println("no scenario ran")
		os.Exit(1)
	case bad > 0:
		fmt.Printf("%d of %d not passed (a SKIP counts as not passed)\n", bad, len(results))
		os.Exit(1)
	case *rc != 0:
		fmt.Printf("go test exited with status %d\n", *rc)
		os.Exit(1)
	}
	fmt.Printf("all %d passed\n", len(results))
}
