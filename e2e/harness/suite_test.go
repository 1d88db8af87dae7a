package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// onSignals are the signals OnSignal handles, by name.
var onSignals = map[string]syscall.Signal{"SIGINT": syscall.SIGINT, "SIGTERM": syscall.SIGTERM, "SIGHUP": syscall.SIGHUP}

// TestOnSignal runs OnSignal in a child process that sends itself each
// signal: the teardown must run, with the signal, and the child must
// exit with status 130.
func TestOnSignal(t *testing.T) {
	if sig := os.Getenv("HARNESS_ONSIGNAL_CHILD"); sig != "" {
		OnSignal(func(s os.Signal) { fmt.Printf("teardown %v\n", s) })
		_ = syscall.Kill(os.Getpid(), onSignals[sig])
		// OnSignal exits the process; the test's own timeout ends it if not.
		time.Sleep(time.Hour)
		return
	}
	for name, sig := range onSignals {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestOnSignal$", "-test.timeout=60s")
			cmd.Env = append(os.Environ(), "HARNESS_ONSIGNAL_CHILD="+name)
			out, err := cmd.Output()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "child: %v", err)
			require.Equal(t, 130, exit.ExitCode())
			require.Equal(t, "teardown "+sig.String()+"\n", string(out))
		})
	}
}
