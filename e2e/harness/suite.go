package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Logger receives the harness's progress lines; *testing.T is one.
type Logger interface {
	Logf(format string, args ...any)
}

// Suite holds what all nodes of one process share: the machine lock, the
// tools, the product binaries, the helper binaries and the images.
type Suite struct {
	Tools   Tools
	Product Product
	// WorkDir holds one directory per node.
	WorkDir string
	// OOMClamp is true when the host refuses a negative oom_score_adj and
	// runc runs behind the runc-rig wrapper, which clamps it.
	OOMClamp bool

	log      Logger
	lock     *Lock
	e2eRoot  string
	assetDir string
	// rigBin is the runc-rig wrapper, built on first use (rigWrapper).
	rigBin  string
	rigErr  error
	rigOnce sync.Once
	images  []image

	mu        sync.Mutex
	nodes     map[*Node]bool
	closeOnce sync.Once
	closeErr  error
}

// NewSuite checks that the process is root, takes the machine lock,
// cleans up after an earlier run that died, probes the host and builds the
// images. Close releases it all.
func NewSuite(ctx context.Context, log Logger) (s *Suite, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the e2e harness must run as root: it runs containerd, runc and the kubelet")
	}
	tools, err := FindTools()
	if err != nil {
		return nil, err
	}
	product, err := FindProduct()
	if err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	s = &Suite{
		Tools:   tools,
		Product: product,
		WorkDir: envOr(EnvWorkDir, DefaultWorkDir),
		log:     log,
		e2eRoot: filepath.Join(root, "e2e"),
		nodes:   map[*Node]bool{},
	}
	waited := time.Now()
	lock, err := AcquireLock(ctx, LockPath)
	if err != nil {
		return nil, err
	}
	if d := time.Since(waited); d > time.Second {
		log.Logf("waited %s for the machine lock %s", d.Round(time.Second), LockPath)
	}
	s.lock = lock
	start := time.Now()
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := reapStale(log, s.WorkDir); err != nil {
		return nil, fmt.Errorf("clean up an earlier run: %w", err)
	}
	if err := os.MkdirAll(s.WorkDir, 0o755); err != nil {
		return nil, err
	}
	// Under the work dir, so that the next run reaps it when this process
	// is killed before Close.
	s.assetDir, err = os.MkdirTemp(s.WorkDir, ".assets-")
	if err != nil {
		return nil, err
	}
	s.OOMClamp = !negativeOOMScoreAdjAllowed()
	if s.OOMClamp {
		log.Logf("host refuses a negative oom_score_adj: runc runs behind runc-rig, which clamps it")
		if _, err := s.rigWrapper(); err != nil {
			return nil, err
		}
	}
	s.images, err = buildImages(s.e2eRoot, s.assetDir)
	if err != nil {
		return nil, err
	}
	log.Logf("suite ready in %s: images built, host probed", time.Since(start).Round(100*time.Millisecond))
	return s, nil
}

// rigWrapper builds the runc-rig wrapper (e2e/cmd/runc-rig) once and
// returns its path. A node puts it before runc only when the host needs
// an adaptation (OOMClamp, or a cgroup v2 rig without some controllers).
func (s *Suite) rigWrapper() (string, error) {
	s.rigOnce.Do(func() {
		s.rigBin = filepath.Join(s.assetDir, "runc-rig")
		s.rigErr = goBuild(s.e2eRoot, "./cmd/runc-rig", s.rigBin, false)
	})
	return s.rigBin, s.rigErr
}

// negativeOOMScoreAdjAllowed probes in a child process whether this host
// lets a process lower its oom_score_adj, as runc does for pod sandboxes.
func negativeOOMScoreAdjAllowed() bool {
	cmd := exec.Command("/bin/sh", "-c", "echo -998 > /proc/self/oom_score_adj")
	return cmd.Run() == nil
}

// Close stops every node still running and releases the lock. Like
// Node.Close it may be called more than once.
func (s *Suite) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Suite) close() error {
	var errs []error
	s.mu.Lock()
	nodes := make([]*Node, 0, len(s.nodes))
	for n := range s.nodes {
		nodes = append(nodes, n)
	}
	s.mu.Unlock()
	for _, n := range nodes {
		errs = append(errs, n.Close())
	}
	if s.assetDir != "" {
		errs = append(errs, os.RemoveAll(s.assetDir))
	}
	// The work dir goes when no node dir is left in it.
	_ = os.Remove(s.WorkDir)
	errs = append(errs, s.lock.Release())
	return errors.Join(errs...)
}

// InstallSignalHandler tears the suite down on SIGINT, SIGTERM or SIGHUP
// and exits with status 130, so an interrupted run leaves nothing behind.
// The returned function removes the handler.
func (s *Suite) InstallSignalHandler() (stop func()) {
	return OnSignal(func(sig os.Signal) {
		fmt.Fprintf(os.Stderr, "e2e: %v: tearing down\n", sig)
		if err := s.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: teardown: %v\n", err)
		}
	})
}

// OnSignal runs teardown on the first SIGINT, SIGTERM or SIGHUP and then
// exits with status 130, for a program that must not leave a node's
// processes, mounts or files behind when it is interrupted. The returned
// function removes the handler.
func OnSignal(teardown func(os.Signal)) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			teardown(sig)
			os.Exit(130)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

func (s *Suite) track(n *Node, live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if live {
		s.nodes[n] = true
	} else {
		delete(s.nodes, n)
	}
}
