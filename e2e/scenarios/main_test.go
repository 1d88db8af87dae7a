package scenarios

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
)

// suite is shared by all scenarios of this process.
var suite *harness.Suite

type stdoutLogger struct{}

func (stdoutLogger) Logf(format string, args ...any) {
	fmt.Printf("%s e2e: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	s, err := harness.NewSuite(ctx, stdoutLogger{})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: cannot set up the suite: %v\n", err)
		os.Exit(1)
	}
	suite = s
	stop := s.InstallSignalHandler()
	defer stop()
	watchdog(s)
	code := m.Run()
	if err := s.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: teardown: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

// watchdog tears the suite down shortly before go test's -timeout would
// panic the binary: a panic skips every cleanup and would leave the
// node's processes and mounts behind.
func watchdog(s *harness.Suite) {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return
	}
	d, err := time.ParseDuration(f.Value.String())
	if err != nil || d <= 0 {
		return
	}
	margin := time.Minute
	if d < 4*margin {
		margin = d / 4
	}
	time.AfterFunc(d-margin, func() {
		fmt.Fprintf(os.Stderr, "e2e: -timeout %v is about to expire: tearing down\n", d)
		if err := s.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: teardown: %v\n", err)
		}
		os.Exit(1)
	})
}

// startNode starts a node for one test (startForTest).
func startNode(t *testing.T, opts harness.NodeOptions) *harness.Node {
	t.Helper()
	return startForTest(t, "node", suite.StartNode, opts)
}

// startForTest starts a node or a cluster (what) for one test, and fails
// the test when it does not start. It tears it down when the test ends,
// dumping its logs first when the test failed.
func startForTest[O any, T interface {
	DumpLogs()
	Close() error
}](t *testing.T, what string, start func(context.Context, harness.Logger, O) (T, error), opts O) T {
	t.Helper()
	c, err := start(context.Background(), t, opts)
	if err != nil {
		t.Fatalf("start %s: %v", what, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.DumpLogs()
		}
		if err := c.Close(); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	return c
}
