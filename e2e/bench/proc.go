package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is a product binary started by the bench, in its own process
// group, killed if the bench dies.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startProcess(name, logPath string, argv ...string) (*process, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		lf.Close()
		close(p.done)
	}()
	logf("%s started (pid %d): %s", name, cmd.Process.Pid, strings.Join(argv, " "))
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// exited describes how the process ended, with the tail of its log.
func (p *process) exited() error {
	data, _ := os.ReadFile(p.log)
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, data)
}

// stop sends SIGTERM to the process group and kills it after grace.
func (p *process) stop(grace time.Duration) {
	if p == nil || !p.running() {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.done
	}
}

// steadyRSS waits settle, then samples the VmRSS of a process n times,
// interval apart, and returns the samples in MiB.
func steadyRSS(pid int, settle, interval time.Duration, n int) ([]float64, error) {
	time.Sleep(settle)
	out := make([]float64, 0, n)
	for i := range n {
		if i > 0 {
			time.Sleep(interval)
		}
		mb, err := RSSMB(pid)
		if err != nil {
			return nil, fmt.Errorf("pid %d: %w", pid, err)
		}
		out = append(out, mb)
	}
	return out, nil
}
