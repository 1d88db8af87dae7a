package main

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// recordBinaries notes the size and build tags of the product binaries
// measured, since their size is most of their resident memory (the
// kernel maps a binary's cached pages around every page it touches).
func (b *bench) recordBinaries() {
	for _, name := range []string{"dri-cdi-agent", "dri-cdi-nri"} {
		path := filepath.Join(b.cfg.BinDir, name)
		st, err := os.Stat(path)
		if err != nil {
			continue
		}
		tags := "none"
		if bi, err := buildinfo.ReadFile(path); err == nil {
			for _, s := range bi.Settings {
				if s.Key == "-tags" {
					tags = s.Value
				}
			}
		}
		b.report.Params.Versions[name] = fmt.Sprintf("%.1f MiB binary, build tags: %s", float64(st.Size())/(1<<20), tags)
	}
}
