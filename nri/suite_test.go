package nri_test

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/runtime-tools/generate"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/kubeletcheckpoint"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
)

const (
	kind      = "dri-cdi.dev/gpu"
	resI915   = "dri-cdi.dev/i915"
	cardA     = "0000:00:02.0"
	cardB     = "0000:03:00.0"
	renderGID = 109
	videoGID  = 44
	waitFor   = 10 * time.Second
	tick      = 5 * time.Millisecond
)

// served is a ResourceFilter over a fixed set of names.
type served map[string]bool

func (s served) ServesResource(name string) bool { return s[name] }

// specs are the cards our CDI specs describe in these tests.
var specs = map[string][]drm.DeviceNode{
	cardA: {
		{Path: "/dev/dri/card1", HostPath: "/dev/dri/card1", Major: 226, Minor: 1, Mode: 0o660, GID: videoGID},
		{Path: "/dev/dri/renderD128", HostPath: "/dev/dri/renderD128", Major: 226, Minor: 128, Mode: 0o660, GID: renderGID},
	},
	cardB: {
		{Path: "/dev/dri/card2", HostPath: "/dev/dri/card2", Major: 226, Minor: 2, Mode: 0o660, GID: videoGID},
		{Path: "/dev/dri/renderD129", HostPath: "/dev/dri/renderD129", Major: 226, Minor: 129, Mode: 0o660, GID: renderGID},
	},
}

// rig is the real NRI runtime side (the adaptation package containerd
// uses), the real plugin connected to it over a unix socket, and a fake
// kubelet PodResources server.
type rig struct {
	t       testing.TB
	dir     string
	nriSock string
	kubelet *podresourcestest.Server
	client  *podresources.Client
	plugin  *nri.Plugin
	store   *nri.SpecIndex
	logs    *logtest.Hook

	mu      sync.Mutex
	runtime *adaptation.Adaptation
	proxy   *proxy

	cancel  context.CancelFunc
	runDone chan error
}

type rigOption func(*rigConfig)

type rigConfig struct {
	podResourcesTimeout time.Duration
	checkpoint          bool
	memory              *memoryConfig
}

// memoryConfig is where a rig made withMemory reads the DRA checkpoint
// and the cgroup root, and which pools require a limit.
type memoryConfig struct {
	draCheckpoint, cgroupRoot string
	required                  map[string]bool
}

func (m *memoryConfig) RequiresMemoryLimit(resource string) bool { return m.required[resource] }

// withMemory gives the plugin the real DRA checkpoint reader and a
// cgroup root.
func withMemory(m *memoryConfig) rigOption {
	return func(c *rigConfig) { c.memory = m }
}

// withCheckpoint gives the plugin a kubelet checkpoint reader of
// rig.checkpointPath().
func withCheckpoint() rigOption {
	return func(c *rigConfig) { c.checkpoint = true }
}

func withPodResourcesTimeout(d time.Duration) rigOption {
	return func(c *rigConfig) { c.podResourcesTimeout = d }
}

func newRig(t testing.TB, opts ...rigOption) *rig {
	t.Helper()
	cfg := rigConfig{podResourcesTimeout: 5 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	dir, err := os.MkdirTemp("", "dc")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, os.RemoveAll(dir)) })

	r := &rig{t: t, dir: dir, nriSock: filepath.Join(dir, "nri.sock")}
	r.kubelet, err = podresourcestest.Start(filepath.Join(dir, "kubelet.sock"))
	require.NoError(t, err)
	t.Cleanup(func() { r.kubelet.Stop() })

	r.client, err = podresources.New(r.kubelet.Socket(), podresources.WithTimeout(cfg.podResourcesTimeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.client.Close() })

	logger, hook := logtest.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	r.logs = hook
	log := logger.WithField("component", "nri")
	metrics := nri.NewMetrics()
	r.store = nri.NewSpecIndex(filepath.Join(dir, "cdi"), kind,
		func(string, string) (map[string][]drm.DeviceNode, error) { return specs, nil }, metrics, log)
	require.NoError(t, r.store.Reload())
	pcfg := nri.Config{
		Kind:       kind,
		Resources:  served{resI915: true},
		Authorizer: r.client,
		Devices:    r.store,
		Metrics:    metrics,
		Log:        log,
		HostStat:   specHost.stat,
	}
	if cfg.memory != nil {
		pcfg.Memory = nri.NewDRACheckpoint(cfg.memory.draCheckpoint)
		pcfg.MemoryPolicy = cfg.memory
		pcfg.CgroupRoot = cfg.memory.cgroupRoot
	}
	if cfg.checkpoint {
		pcfg.Checkpoint = kubeletcheckpoint.NewReader(r.checkpointPath(), cfg.podResourcesTimeout)
	}
	r.plugin, err = nri.New(pcfg)
	require.NoError(t, err)
	// The runtime side logs through logrus' standard logger.
	logrus.SetLevel(logrus.WarnLevel)
	return r
}

// checkpointPath is where a rig made withCheckpoint reads the kubelet's
// device manager checkpoint.
func (r *rig) checkpointPath() string { return filepath.Join(r.dir, kubeletcheckpoint.FileName) }

func (r *rig) startRuntime() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	rt, err := adaptation.New("containerd", "v2.4.2",
		func(ctx context.Context, cb adaptation.SyncCB) error {
			_, err := cb(ctx, nil, nil)
			return err
		},
		func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil },
		adaptation.WithPluginPath(filepath.Join(r.dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(r.dir, "conf.d")),
		adaptation.WithSocketPath(filepath.Join(r.dir, "rt.sock")),
	)
	require.NoError(r.t, err)
	require.NoError(r.t, rt.Start())
	r.runtime = rt
	r.proxy, err = startProxy(r.nriSock, filepath.Join(r.dir, "rt.sock"))
	require.NoError(r.t, err)
	r.t.Cleanup(r.stopRuntime)
}

// stopRuntime stops the runtime side as a runtime process exiting would:
// its socket disappears and every plugin connection closes.
func (r *rig) stopRuntime() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runtime != nil {
		r.proxy.close()
		r.runtime.Stop()
		r.runtime = nil
	}
}

// proxy forwards plugin connections from the socket plugins dial to the
// runtime side's socket. The adaptation package keeps connections of
// external plugins open when stopped; closing them here is what a
// runtime that exits does.
type proxy struct {
	front string
	l     net.Listener
	wg    sync.WaitGroup

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func startProxy(front, back string) (*proxy, error) {
	l, err := net.Listen("unix", front)
	if err != nil {
		return nil, err
	}
	p := &proxy{front: front, l: l}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("unix", back)
			if err != nil {
				_ = c.Close()
				continue
			}
			if !p.track(c, b) {
				return
			}
			for _, pair := range [][2]net.Conn{{c, b}, {b, c}} {
				p.wg.Add(1)
				go func(dst, src net.Conn) {
					defer p.wg.Done()
					_, _ = io.Copy(dst, src)
					_ = dst.Close()
					_ = src.Close()
				}(pair[0], pair[1])
			}
		}
	}()
	return p, nil
}

func (p *proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	p.conns = append(p.conns, conns...)
	return true
}

func (p *proxy) close() {
	_ = p.l.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	_ = os.Remove(p.front)
}

// startPlugin runs the plugin's connection loop until the test ends.
func (r *rig) startPlugin() {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.runDone = make(chan error, 1)
	go func() {
		r.runDone <- r.plugin.Run(ctx, nri.ConnectConfig{
			Socket:     r.nriSock,
			MinBackoff: 10 * time.Millisecond,
			MaxBackoff: 50 * time.Millisecond,
		})
	}()
	r.t.Cleanup(func() {
		cancel()
		select {
		case err := <-r.runDone:
			require.NoError(r.t, err)
		case <-time.After(waitFor):
			r.t.Error("plugin did not stop")
		}
	})
}

// waitRegistered waits until the runtime has the plugin in its list.
func (r *rig) waitRegistered() {
	r.t.Helper()
	require.Eventually(r.t, r.plugin.Connected, waitFor, tick)
	r.mu.Lock()
	rt := r.runtime
	r.mu.Unlock()
	// Synchronization holds this lock until the plugin is in the list.
	rt.BlockPluginSync().Unblock()
}

func (r *rig) start() {
	r.t.Helper()
	r.startRuntime()
	r.startPlugin()
	r.waitRegistered()
}

// create runs CreateContainer through the runtime side and applies the
// adjustment to the container's OCI spec the way containerd does.
func (r *rig) create(pod *api.PodSandbox, ctr *api.Container) (*rspec.Spec, error) {
	r.t.Helper()
	spec := baseSpec(ctr)
	r.mu.Lock()
	rt := r.runtime
	r.mu.Unlock()
	b := rt.BlockPluginSync()
	rsp, err := rt.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: pod, Container: ctr})
	b.Unblock()
	if err != nil {
		return nil, err
	}
	g := generate.SpecGenerator(&specGen{spec: spec})
	require.NoError(r.t, g.Adjust(rsp.GetAdjust()))
	return spec, nil
}

// baseSpec is the OCI spec of a non-privileged container before NRI: the
// deny-all device rule, plus any devices the runtime's CDI injection
// added with their allow rules.
func baseSpec(ctr *api.Container) *rspec.Spec {
	s := &rspec.Spec{
		Process: &rspec.Process{},
		Linux: &rspec.Linux{Resources: &rspec.LinuxResources{
			Devices: []rspec.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
		}},
	}
	for _, d := range ctr.GetLinux().GetDevices() {
		s.Linux.Devices = append(s.Linux.Devices, d.ToOCI())
		major, minor := d.Major, d.Minor
		s.Linux.Resources.Devices = append(s.Linux.Resources.Devices,
			rspec.LinuxDeviceCgroup{Allow: true, Type: d.Type, Major: &major, Minor: &minor, Access: "rwm"})
	}
	return s
}

// specGen applies NRI adjustments to an OCI spec the way containerd's CRI
// spec generator does. Only device adjustments are implemented: any other
// call hits the nil embedded interface and fails the test.
type specGen struct {
	generate.UnderlyingGenerator
	spec *rspec.Spec
}

func (g *specGen) Spec() *rspec.Spec { return g.spec }

func (g *specGen) AddDevice(d rspec.LinuxDevice) {
	for i := range g.spec.Linux.Devices {
		if g.spec.Linux.Devices[i].Path == d.Path {
			g.spec.Linux.Devices[i] = d
			return
		}
	}
	g.spec.Linux.Devices = append(g.spec.Linux.Devices, d)
}

func (g *specGen) RemoveDevice(path string) {
	for i := range g.spec.Linux.Devices {
		if g.spec.Linux.Devices[i].Path == path {
			g.spec.Linux.Devices = append(g.spec.Linux.Devices[:i], g.spec.Linux.Devices[i+1:]...)
			return
		}
	}
}

func (g *specGen) AddLinuxResourcesUnified(key, val string) {
	if g.spec.Linux.Resources.Unified == nil {
		g.spec.Linux.Resources.Unified = map[string]string{}
	}
	g.spec.Linux.Resources.Unified[key] = val
}

func (g *specGen) AddLinuxResourcesDevice(allow bool, devType string, major, minor *int64, access string) {
	g.spec.Linux.Resources.Devices = append(g.spec.Linux.Resources.Devices,
		rspec.LinuxDeviceCgroup{Allow: allow, Type: devType, Major: major, Minor: minor, Access: access})
}

// Helpers to build requests.

func pod(name string) *api.PodSandbox {
	return &api.PodSandbox{Id: "sandbox-" + name, Name: name, Namespace: "default", Uid: "uid-" + name}
}

type ctrOpt func(*api.Container)

func container(name string, opts ...ctrOpt) *api.Container {
	c := &api.Container{
		Id:          "ctr-" + name,
		Name:        name,
		Annotations: map[string]string{"io.kubernetes.container.restartCount": "0"},
		User:        &api.User{},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// asks gives the container the allocation annotation of resource and ids.
func asks(resource string, ids ...string) ctrOpt {
	return func(c *api.Container) {
		k, v := alloc.Annotation(resource, ids)
		c.Annotations[k] = v
	}
}

func annotation(k, v string) ctrOpt {
	return func(c *api.Container) { c.Annotations[k] = v }
}

func cdiNames(ids ...string) ctrOpt {
	return func(c *api.Container) {
		for _, id := range ids {
			c.CDIDevices = append(c.CDIDevices, &api.CDIDevice{Name: kind + "=" + id})
		}
	}
}

// cdiInjected adds the nodes of cards as the runtime's CDI injection does.
func cdiInjected(ids ...string) ctrOpt {
	return func(c *api.Container) {
		if c.Linux == nil {
			c.Linux = &api.LinuxContainer{}
		}
		for _, id := range ids {
			for _, n := range specs[id] {
				c.Linux.Devices = append(c.Linux.Devices, &api.LinuxDevice{
					Path: n.Path, Type: "c", Major: int64(n.Major), Minor: int64(n.Minor),
					FileMode: api.FileMode(os.FileMode(0o660)),
				})
			}
		}
	}
}

func user(uid, gid uint32) ctrOpt {
	return func(c *api.Container) { c.User = &api.User{Uid: uid, Gid: gid} }
}

func hostPath(src string) ctrOpt {
	return func(c *api.Container) {
		c.Mounts = append(c.Mounts, &api.Mount{Source: src, Destination: src, Type: "bind", Options: []string{"rbind", "rw"}})
	}
}

// metric returns the value of a counter or gauge, or the sample count of a
// histogram, with the given label values.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// sum adds up the values of every series of a counter or gauge.
func sum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}
