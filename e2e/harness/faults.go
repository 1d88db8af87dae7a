package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// Faults the soak (e2e/scenarios/soak_test.go) injects into a running
// node. Each injector returns once the fault is in place; the host
// processes the harness owns are started again at once, as systemd
// would; a daemon in a pod comes back through its DaemonSet's kubelet.

// KillKubelet SIGKILLs the kubelet and starts it again.
func (n *Node) KillKubelet(ctx context.Context) error {
	n.kubelet.Stop(syscall.SIGKILL, 10*time.Second)
	return n.StartKubelet(ctx)
}

// KillContainerd SIGKILLs containerd (the shims and their containers
// live on, in process groups of their own) and starts it again.
func (n *Node) KillContainerd(ctx context.Context) error {
	n.containerd.Stop(syscall.SIGKILL, 10*time.Second)
	return n.StartContainerd(ctx)
}

// KillPodContainer SIGKILLs the process of the running container named
// container of a pod in namespace ns, found through CRI, and returns its
// CRI id. The kubelet restarts the container.
func (n *Node) KillPodContainer(ctx context.Context, ns, container string) (string, error) {
	ids, err := n.runningContainers(ctx, ns, container)
	if err != nil {
		return "", err
	}
	if len(ids) != 1 {
		return "", fmt.Errorf("kill %s/%s: %d running containers, want 1", ns, container, len(ids))
	}
	pid, err := n.ContainerPid(ctx, ids[0])
	if err != nil {
		return "", err
	}
	if pid <= 0 {
		return "", fmt.Errorf("kill %s/%s: container %s has no process", ns, container, ids[0])
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return "", fmt.Errorf("kill %s/%s (pid %d): %w", ns, container, pid, err)
	}
	return ids[0], nil
}

// runningContainers are the ids of the running containers named
// container of the pods in ns.
func (n *Node) runningContainers(ctx context.Context, ns, container string) ([]string, error) {
	out, err := n.Crictl(ctx, "ps", "-q", "--state", "running", "--name", "^"+container+"$",
		"--label", "io.kubernetes.pod.namespace="+ns)
	return strings.Fields(out), err
}

// ContainerPid is the host pid of a container's init process, 0 when it
// does not run.
func (n *Node) ContainerPid(ctx context.Context, id string) (int, error) {
	out, err := n.Crictl(ctx, "inspect", "-o", "go-template", "--template", "{{.info.pid}}", id)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return 0, fmt.Errorf("container %s: pid %q: %w", id, out, err)
	}
	return pid, nil
}

// ErrNoSpecTmpfs means a spec-dir fault was asked of a node whose spec
// dir is not the harness's own tmpfs (NodeOptions.SpecDirSize).
var ErrNoSpecTmpfs = errors.New("the spec dir is not a tmpfs of the harness (set SpecDirSize)")

// SetSpecDirReadOnly remounts the node's spec tmpfs read-only (ro) or
// read-write. It remounts the same superblock, so every bind mount of it
// (the daemons' hostPath volumes) turns read-only too, its size stays,
// and an inotify watch on the directory (containerd's CDI cache) keeps
// working: measured with fsnotify on this kernel, a file created after a
// read-only and back round trip is reported. Mounting a new tmpfs over
// the directory instead would hide it from that watch.
func (n *Node) SetSpecDirReadOnly(ro bool) error {
	if n.opts.SpecDirSize == "" {
		return ErrNoSpecTmpfs
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	if ro {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", n.CDIDir, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s (read-only %v): %w", n.CDIDir, ro, err)
	}
	return nil
}

// PodResourcesProxy stands between the daemons and the kubelet's
// PodResources socket: it listens on a socket of its own, forwards each
// connection to the kubelet's socket, and holds every byte from a client
// for the current delay before it passes it on, so each request arrives
// that much later while the answers come back at once. A connection whose
// kubelet side fails is closed; the client dials again, as it does when
// the kubelet restarts.
type PodResourcesProxy struct {
	// Socket is where it listens.
	Socket   string
	upstream string
	l        net.Listener
	delay    atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// StartPodResourcesProxy listens on socket (its directory is created)
// and forwards to upstream.
func StartPodResourcesProxy(socket, upstream string) (*PodResourcesProxy, error) {
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		return nil, err
	}
	_ = os.Remove(socket)
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("PodResources proxy: %w", err)
	}
	p := &PodResourcesProxy{Socket: socket, upstream: upstream, l: l, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// SetDelay sets how long requests are held from now on (0: none).
func (p *PodResourcesProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Close stops listening and closes every connection.
func (p *PodResourcesProxy) Close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.l.Close()
	p.wg.Wait()
	_ = os.Remove(p.Socket)
	return err
}

func (p *PodResourcesProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *PodResourcesProxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *PodResourcesProxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("unix", p.upstream, 2*time.Second)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client, up) {
			client.Close()
			up.Close()
			return
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(client, up)
			p.untrack(client, up)
		}()
		go func() {
			defer p.wg.Done()
			p.forwardDelayed(client, up)
			p.untrack(client, up)
		}()
	}
}

// forwardDelayed copies client to up, each chunk held until the delay
// in force when it was read has passed.
func (p *PodResourcesProxy) forwardDelayed(client, up net.Conn) {
	type chunk struct {
		data []byte
		due  time.Time
	}
	chunks := make(chan chunk, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range chunks {
			time.Sleep(time.Until(c.due))
			if _, err := up.Write(c.data); err != nil {
				client.Close()
				for range chunks {
				}
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		k, err := client.Read(buf)
		if k > 0 {
			chunks <- chunk{data: append([]byte(nil), buf[:k]...), due: time.Now().Add(time.Duration(p.delay.Load()))}
		}
		if err != nil {
			break
		}
	}
	close(chunks)
	<-done
}

// The soak's faults (soak.go). A kill recovers inside Inject (the host
// process is started again, the pod's container restarted by the
// kubelet) and needs no heal; the others hold until healed.

// FaultKillDaemon SIGKILLs the product container named container of the
// DaemonSet daemonSet in ns, and waits until the kubelet restarted it and
// the DaemonSet is Ready again.
func FaultKillDaemon(ns, daemonSet, container string) Fault {
	return Fault{Kind: "kill " + container, Inject: func(ctx context.Context, s *Soak) (func(context.Context) error, error) {
		n := s.Node()
		killed, err := n.KillPodContainer(ctx, ns, container)
		if err != nil {
			return nil, err
		}
		err = poll(ctx, 3*time.Minute, func() (bool, error) {
			ids, err := n.runningContainers(ctx, ns, container)
			return err == nil && len(ids) == 1 && ids[0] != killed, nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s not restarted: %w", container, err)
		}
		return nil, s.Cluster().WaitDaemonSetReady(ctx, ns, daemonSet, 3*time.Minute)
	}}
}

// FaultKillKubelet SIGKILLs the kubelet, starts it again and waits until
// the node is Ready.
func FaultKillKubelet() Fault {
	return Fault{Kind: "kill kubelet", Inject: func(ctx context.Context, s *Soak) (func(context.Context) error, error) {
		if err := s.Node().KillKubelet(ctx); err != nil {
			return nil, err
		}
		return nil, s.Cluster().WaitNodeReady(ctx, 2*time.Minute)
	}}
}

// FaultKillContainerd SIGKILLs containerd and starts it again.
func FaultKillContainerd() Fault {
	return Fault{Kind: "kill containerd", Inject: func(ctx context.Context, s *Soak) (func(context.Context) error, error) {
		if err := s.Node().KillContainerd(ctx); err != nil {
			return nil, err
		}
		return nil, s.Cluster().WaitNodeReady(ctx, 2*time.Minute)
	}}
}

// FaultUnbind unbinds a random card's driver; heal binds it again with
// its numbers.
func FaultUnbind() Fault {
	return Fault{Kind: "unbind", Inject: func(ctx context.Context, s *Soak) (func(context.Context) error, error) {
		cards := s.Cards()
		x := cards[s.Rand().IntN(len(cards))]
		tree := s.Node().Tree
		s.Logf("unbind %s", x.ID())
		if err := changeTopology(s, func() error { return tree.Unbind(x.ID()) }); err != nil {
			return nil, err
		}
		return func(context.Context) error {
			return changeTopology(s, func() error { return tree.Rebind(x.ID()) })
		}, nil
	}}
}

// FaultRenumber unbinds a random card X, and another card Y re-probes and
// takes X's numbers, as a driver reload can; the running containers that
// still hold X's numbers are counted (invariant 2). Heal gives Y its own
// numbers back and binds X again.
func FaultRenumber() Fault {
	return Fault{Kind: "renumber", Inject: func(ctx context.Context, s *Soak) (func(context.Context) error, error) {
		cards := s.Cards()
		if len(cards) < 2 {
			return nil, fmt.Errorf("renumber needs two cards, the node has %d", len(cards))
		}
		i := s.Rand().IntN(len(cards))
		j := (i + 1 + s.Rand().IntN(len(cards)-1)) % len(cards)
		x, y := cards[i], cards[j]
		tree := s.Node().Tree
		s.Logf("unbind %s; %s takes its numbers %d/%d", x.ID(), y.ID(), x.Card, x.Render)
		if err := changeTopology(s, func() error { return tree.Unbind(x.ID()) }); err != nil {
			return nil, err
		}
		if err := changeTopology(s, func() error { return tree.Renumber(y.ID(), x.Card, x.Render) }); err != nil {
			return nil, err
		}
		held := s.CountHolders(ctx, []string{fmt.Sprintf("%d:%d", drmtest.DRMMajor, x.Card), fmt.Sprintf("%d:%d", drmtest.DRMMajor, x.Render)})
		s.Logf("%d running containers hold %s's numbers, now %s's", held, x.ID(), y.ID())
		return func(context.Context) error {
			if err := changeTopology(s, func() error { return tree.Renumber(y.ID(), y.Card, y.Render) }); err != nil {
				return err
			}
			return changeTopology(s, func() error { return tree.Rebind(x.ID()) })
		}, nil
	}}
}

// changeTopology changes the fake tree and records the host's new
// topology.
func changeTopology(s *Soak, change func() error) error {
	if err := change(); err != nil {
		return err
	}
	return s.RecordTopology()
}

// FaultFillSpecDir fills the spec dir's tmpfs to the last byte; heal
// frees it.
func FaultFillSpecDir() Fault {
	return Fault{Kind: "spec dir full", Inject: func(ctx context.Context, s *Soak) (func(context.Context) error, error) {
		if err := s.Node().FillSpecDir(); err != nil {
			return nil, err
		}
		return func(context.Context) error { return s.Node().FreeSpecDir() }, nil
	}}
}

// FaultReadOnlySpecDir remounts the spec dir's tmpfs read-only; heal
// remounts it read-write.
func FaultReadOnlySpecDir() Fault {
	return Fault{Kind: "spec dir read-only", Inject: func(ctx context.Context, s *Soak) (func(context.Context) error, error) {
		if err := s.Node().SetSpecDirReadOnly(true); err != nil {
			return nil, err
		}
		return func(context.Context) error { return s.Node().SetSpecDirReadOnly(false) }, nil
	}}
}

// FaultDelayPodResources holds every PodResources request of the daemons
// for a random 100 ms to 1 s (the manifests' deadline is 250 ms) in the
// cluster's PodResourcesProxy; heal lifts the delay.
func FaultDelayPodResources() Fault {
	return Fault{Kind: "delay PodResources", Inject: func(ctx context.Context, s *Soak) (func(context.Context) error, error) {
		p := s.Cluster().PodResources
		if p == nil {
			return nil, errors.New("the cluster has no PodResources proxy (ClusterOptions.PodResourcesProxy)")
		}
		d := between(s.Rand(), 100*time.Millisecond, time.Second).Round(10 * time.Millisecond)
		s.Logf("PodResources delayed by %s", d)
		p.SetDelay(d)
		return func(context.Context) error { p.SetDelay(0); return nil }, nil
	}}
}
