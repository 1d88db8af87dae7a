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

// How every *_rss_mb key is sampled: rssSettle after the load, then
// rssSamples samples rssInterval apart; the key is their median.
const (
	rssSettle   = 2 * time.Second
	rssInterval = 500 * time.Millisecond
	rssSamples  = 5
)

// rssMethod says in a report note how the RSS was sampled.
var rssMethod = fmt.Sprintf("median of %d samples %g s apart, %g s after the load", rssSamples, rssInterval.Seconds(), rssSettle.Seconds())

// steadyRSS waits rssSettle, then samples the VmRSS of a process
// rssSamples times, rssInterval apart, and returns the samples in MiB.
func steadyRSS(pid int) ([]float64, error) {
	time.Sleep(rssSettle)
	out := make([]float64, 0, rssSamples)
	for i := range rssSamples {
		if i > 0 {
			time.Sleep(rssInterval)
		}
		mb, err := RSSMB(pid)
		if err != nil {
			return nil, fmt.Errorf("pid %d: %w", pid, err)
		}
		out = append(out, mb)
	}
	return out, nil
}

// steadyRSS is steadyRSS of the process, and the process's exit error if
// it is no longer running after the samples.
func (p *process) steadyRSS() ([]float64, error) {
	rss, err := steadyRSS(p.pid())
	if err != nil {
		return nil, err
	}
	if !p.running() {
		return nil, p.exited()
	}
	return rss, nil
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
