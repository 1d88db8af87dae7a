package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// startInOrder runs each start in turn, each after the one before it is
// up, and stops at the first that fails: the components a node or a
// control plane needs, in the order they depend on each other.
func startInOrder(ctx context.Context, starts ...func(context.Context) error) error {
	for _, start := range starts {
		if err := start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Process is a host process started by the harness or the bench, in its
// own process group, with output appended to a log file, and SIGTERM'ed
// when the process that started it dies.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	pidFile string
	done    chan struct{}
	err     error
}

// StartProcess starts argv as the process name, its output appended to
// logPath.
func StartProcess(name, logPath string, argv ...string) (*Process, error) {
	return startProc(name, logPath, "", nil, argv...)
}

// startProc is StartProcess with env added to the harness's environment
// and, when pidDir is set, a pid file there for the reaper of a later
// run.
func startProc(name, logPath, pidDir string, env []string, argv ...string) (*Process, error) {
	if err := executable(argv[0]); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	fmt.Fprintf(logf, "=== %s: %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	// Own process group so signals reach the whole tree; SIGTERM when the
	// harness process dies so a killed test run does not leave daemons.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	if pidDir != "" {
		p.pidFile = filepath.Join(pidDir, name+".pid")
		if st, err := procStartTime(cmd.Process.Pid); err == nil {
			_ = os.WriteFile(p.pidFile, []byte(fmt.Sprintf("%d %d\n", cmd.Process.Pid, st)), 0o644)
		}
	}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls ready until it holds; when the process exits first it
// fails at once with the end of the process's log, instead of waiting out
// the timeout. Its error says "wait for <what>".
func (p *Process) waitReady(ctx context.Context, what string, timeout time.Duration, ready func() bool) error {
	err := poll(ctx, timeout, func() (bool, error) {
		if !p.Running() {
			return false, p.Exited()
		}
		return ready(), nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s: %w", what, err)
	}
	return nil
}

// Pid is the process's pid, also its process group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Exited describes how the process ended, with the end of its log; it
// is for after Running turned false.
func (p *Process) Exited() error {
	return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.tail(4000))
}

// Stop sends sig to the process group, waits up to grace, then kills it.
// Stop of a nil Process (one never started) does nothing.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) {
	if p == nil {
		return
	}
	if p.Running() {
		_ = syscall.Kill(-p.Pid(), sig)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
			<-p.done
		}
	}
	if p.pidFile != "" {
		_ = os.Remove(p.pidFile)
	}
}

// tail returns the last n bytes of the process log.
func (p *Process) tail(n int) string {
	return tailFile(p.logPath, n)
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log %s: %v)", path, err)
	}
	if len(data) > n {
		data = data[len(data)-n:]
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return string(data)
}

// procStartTime is field 22 of /proc/<pid>/stat: it tells a process from
// a later one that reused its PID.
func procStartTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return 0, errors.New("malformed stat")
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// killPidFile kills the process recorded in a pid file if it is still the
// same process.
func killPidFile(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var pid int
	var st uint64
	if _, err := fmt.Sscanf(string(data), "%d %d", &pid, &st); err != nil || pid <= 1 {
		return
	}
	if cur, err := procStartTime(pid); err == nil && cur == st {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitGone(pid, 5*time.Second)
	}
	_ = os.Remove(path)
}

func waitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		// A zombie child of ours still answers kill(0); it is gone for
		// our purposes once its state is Z.
		if zombie(pid) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}
