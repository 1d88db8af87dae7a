package kubelettest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/pkg/config"
)

// CheckpointName is the kubelet's checkpoint file, which a restart keeps.
const CheckpointName = "kubelet_internal_checkpoint"

// Kubelet is the fake kubelet.
type Kubelet struct {
	pluginapi.UnimplementedRegistrationServer

	dir string

	// manager stands for the device manager's lock, which the kubelet
	// takes to store an endpoint, whatever the caller's deadline.
	manager sync.Mutex

	mu        sync.Mutex
	server    *grpc.Server
	endpoints map[string]*Endpoint // latest registration of each resource
	byPath    map[string]*Endpoint // the endpoint store: connected endpoints by socket path
	conns     []*grpc.ClientConn   // every connection to a plugin; the process's death closes them
	died      chan struct{}        // closed when this incarnation stops
	regs      []*pluginapi.RegisterRequest
	reject    int
	rejected  int
	slow      int
	slowFor   time.Duration
	failed    int
	inFlight  int
}

// Start serves kubelet.sock in dir, creating dir if needed.
func Start(dir string) (*Kubelet, error) {
	k := &Kubelet{dir: dir}
	k.reset()
	if err := k.listen(); err != nil {
		return nil, err
	}
	return k, nil
}

// reset forgets every plugin, as a new kubelet process starts knowing
// none, and returns what the previous incarnation left to close.
func (k *Kubelet) reset() (conns []*grpc.ClientConn, died chan struct{}) {
	conns, died = k.conns, k.died
	k.endpoints, k.byPath, k.conns = map[string]*Endpoint{}, map[string]*Endpoint{}, nil
	k.died = make(chan struct{})
	return conns, died
}

// die ends the running incarnation as a killed process ends: its server
// and every connection it opened to a plugin go, so do its pending
// Register calls.
func (k *Kubelet) die() {
	k.mu.Lock()
	s := k.server
	k.server = nil
	conns, died := k.reset()
	k.mu.Unlock()
	close(died)
	if s != nil {
		s.Stop()
	}
	for _, c := range conns {
		_ = c.Close()
	}
}

// Dir is the device-plugins dir.
func (k *Kubelet) Dir() string { return k.dir }

// Socket is the path of kubelet.sock.
func (k *Kubelet) Socket() string { return filepath.Join(k.dir, "kubelet.sock") }

func (k *Kubelet) listen() error {
	if err := os.MkdirAll(k.dir, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", k.dir, err)
	}
	s, err := k.serve(k.Socket())
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.server = s
	k.mu.Unlock()
	return nil
}

func (k *Kubelet) serve(path string) (*grpc.Server, error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// Stop removes the socket itself; closing a listener must not remove
	// a socket that replaced it.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	s := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(s, k)
	go func() { _ = s.Serve(l) }()
	return s, nil
}

// Replace mimics a kubelet that dies, leaving its socket file behind,
// and comes back by renaming a new socket over the old one: the path
// never disappears, so plugins can only notice that kubelet.sock is a new
// file. Endpoints and registrations start from scratch.
func (k *Kubelet) Replace() error {
	k.die()
	k.mu.Lock()
	k.regs = nil
	k.mu.Unlock()
	tmp := filepath.Join(k.dir, ".kubelet.sock.new")
	s, err := k.serve(tmp)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.server = s
	k.mu.Unlock()
	if err := os.Rename(tmp, k.Socket()); err != nil {
		return err
	}
	return nil
}

// Register does what kubelet v1.37's device manager does
// (pkg/kubelet/cm/devicemanager/plugin/v1beta1 server.go, handler.go,
// client.go and manager.go PluginConnected): it checks the request,
// dials the plugin's socket and calls GetDevicePluginOptions within the
// caller's deadline, then stores the endpoint under its socket path,
// waiting for no deadline, and starts ListAndWatch. Its failures are the
// kubelet's too:
//
//   - a socket path that has a connected endpoint is refused ("device
//     plugin already connected"), so a plugin must not register the same
//     socket twice;
//   - a connection opened by a failed attempt is never closed (only the
//     kubelet's death closes it);
//   - a failed attempt forgets every client of its socket path, so an
//     endpoint already connected there is never disconnected: that path
//     is refused until the kubelet restarts.
//
// An endpoint whose stream ends is disconnected and its connection
// closed, unless a failed attempt made the kubelet forget it.
func (k *Kubelet) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.mu.Lock()
	if k.reject > 0 {
		k.reject--
		k.rejected++
		k.mu.Unlock()
		return nil, errors.New("registration rejected by the test")
	}
	var hold time.Duration
	if k.slow > 0 {
		k.slow--
		hold = k.slowFor
	}
	died := k.died
	k.inFlight++
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.inFlight--
		k.mu.Unlock()
	}()
	if req.Version != pluginapi.Version {
		return nil, fmt.Errorf("unsupported API version %q", req.Version)
	}
	if err := config.ValidResourceName(req.ResourceName); err != nil {
		return nil, fmt.Errorf("invalid resource name: %w", err)
	}
	if filepath.Base(req.Endpoint) != req.Endpoint {
		return nil, fmt.Errorf("endpoint %q is not a file name", req.Endpoint)
	}
	path := filepath.Join(k.dir, req.Endpoint)
	e, err := k.connect(ctx, req, path, hold, died)
	if err != nil {
		k.mu.Lock()
		if k.died == died {
			k.failed++
			if old := k.byPath[path]; old != nil {
				old.forgotten = true
			}
		}
		k.mu.Unlock()
		return nil, err
	}
	e.watch(k.disconnect)
	return &pluginapi.Empty{}, nil
}

// connect opens the kubelet's connection to a plugin and stores its
// endpoint; see Register. died is the incarnation the call belongs to.
func (k *Kubelet) connect(ctx context.Context, req *pluginapi.RegisterRequest, path string, hold time.Duration, died chan struct{}) (*Endpoint, error) {
	e, err := dial(path, req.ResourceName)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	if k.died != died {
		k.mu.Unlock()
		_ = e.conn.Close()
		return nil, errors.New("the kubelet stopped")
	}
	k.conns = append(k.conns, e.conn)
	k.mu.Unlock()
	opts, err := e.Client.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		return nil, fmt.Errorf("failed to get device plugin options: %w", err)
	}
	e.Options = opts
	// The device manager's lock, taken after the plugin answered, waits
	// for no deadline of the caller's.
	k.manager.Lock()
	defer k.manager.Unlock()
	select {
	case <-time.After(hold):
	case <-died:
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.died != died {
		return nil, errors.New("the kubelet stopped")
	}
	if k.byPath[path] != nil {
		return nil, fmt.Errorf("device plugin already connected: %s", path)
	}
	k.byPath[path] = e
	k.endpoints[req.ResourceName] = e
	k.regs = append(k.regs, req)
	return e, nil
}

// disconnect is the kubelet's reaction to an ended stream: the endpoint
// leaves the store and its connection is closed, unless a failed
// registration made the kubelet forget it.
func (k *Kubelet) disconnect(e *Endpoint) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e.forgotten || k.byPath[e.Socket] != e {
		return
	}
	delete(k.byPath, e.Socket)
	_ = e.conn.Close()
}

// SlowNext makes the next n Register calls hold the device manager's
// lock for d after the plugin answered GetDevicePluginOptions, whatever
// the caller's deadline, as a kubelet whose device manager is busy
// (starting up, on a loaded node) does; other calls wait for the lock. A
// registration whose caller gave up meanwhile is still stored.
func (k *Kubelet) SlowNext(n int, d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.slow, k.slowFor = n, d
}

// InFlight counts the Register calls being answered.
func (k *Kubelet) InFlight() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.inFlight
}

// Failed counts the Register calls that failed after the request was
// checked (RejectNext's not included): the plugin could not be reached,
// or its socket path was already connected.
func (k *Kubelet) Failed() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.failed
}

// RejectNext makes the next n Register calls fail, as a kubelet that is
// still starting up can.
func (k *Kubelet) RejectNext(n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reject = n
}

// Rejected counts the Register calls failed by RejectNext.
func (k *Kubelet) Rejected() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.rejected
}

// Registrations returns every accepted registration so far, in order.
func (k *Kubelet) Registrations() []*pluginapi.RegisterRequest {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*pluginapi.RegisterRequest(nil), k.regs...)
}

// RegistrationsOf counts the accepted registrations of a resource.
func (k *Kubelet) RegistrationsOf(resource string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, r := range k.regs {
		if r.ResourceName == resource {
			n++
		}
	}
	return n
}

// Endpoint returns the latest registered endpoint of a resource, or nil.
func (k *Kubelet) Endpoint(resource string) *Endpoint {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.endpoints[resource]
}

// Stop ends the kubelet as a killed process ends (every connection it
// opened to a plugin closes) and removes kubelet.sock.
func (k *Kubelet) Stop() {
	k.die()
	_ = os.Remove(k.Socket())
}

// Restart stops, then deletes every file in the dir except the
// checkpoint (wipe: the whole dir), and serves kubelet.sock again, as
// the kubelet does when it starts.
func (k *Kubelet) Restart(wipe bool) error {
	k.Stop()
	if wipe {
		// A plugin may re-create its socket while the tree is being
		// removed; try again then, as an operator's rm -rf would not.
		var err error
		for range 100 {
			if err = os.RemoveAll(k.dir); err == nil {
				break
			}
		}
		if err != nil {
			return err
		}
	} else {
		entries, err := os.ReadDir(k.dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Name() != CheckpointName && !e.IsDir() {
				if err := os.Remove(filepath.Join(k.dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
		}
	}
	return k.listen()
}

// Endpoint is the kubelet's connection to one registered plugin.
type Endpoint struct {
	// Resource and Socket are what the plugin registered.
	Resource, Socket string
	// Options are the answer to GetDevicePluginOptions.
	Options *pluginapi.DevicePluginOptions
	// Client calls the plugin.
	Client pluginapi.DevicePluginClient

	conn *grpc.ClientConn
	// forgotten: a failed registration of the same socket made the
	// kubelet drop this client, which is then never disconnected
	// (guarded by the Kubelet's mutex).
	forgotten bool

	mu        sync.Mutex
	devices   []*pluginapi.Device
	updates   int
	ended     bool
	streamErr error
	changed   chan struct{} // closed and replaced on every message
}

func dial(socket, resource string) (*Endpoint, error) {
	conn, err := grpc.NewClient("unix:"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial plugin %s: %w", socket, err)
	}
	return &Endpoint{Resource: resource, Socket: socket, Client: pluginapi.NewDevicePluginClient(conn), conn: conn, changed: make(chan struct{})}, nil
}

// watch keeps a ListAndWatch stream open, as the kubelet's client does,
// and calls ended when it ends.
func (e *Endpoint) watch(ended func(*Endpoint)) {
	stream, err := e.Client.ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err != nil {
		e.end(err)
		ended(e)
		return
	}
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				e.end(err)
				ended(e)
				return
			}
			e.mu.Lock()
			e.devices = resp.Devices
			e.updates++
			close(e.changed)
			e.changed = make(chan struct{})
			e.mu.Unlock()
		}
	}()
}

func (e *Endpoint) end(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ended, e.streamErr = true, err
	close(e.changed)
}

// Devices returns the latest device list the plugin sent.
func (e *Endpoint) Devices() []*pluginapi.Device {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.devices
}

// Updates returns how many lists the plugin sent on the stream.
func (e *Endpoint) Updates() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.updates
}

// Err returns why the ListAndWatch stream ended, nil while it runs.
func (e *Endpoint) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.streamErr
}

// Ended reports whether the ListAndWatch stream ended.
func (e *Endpoint) Ended() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ended
}

// WaitFor waits until the latest device list satisfies ok, the stream
// ends, or ctx is done; it is meant for benchmarks, where polling would
// distort the measurement.
func (e *Endpoint) WaitFor(ctx context.Context, ok func([]*pluginapi.Device) bool) error {
	for {
		e.mu.Lock()
		devs, ended, ch := e.devices, e.ended, e.changed
		e.mu.Unlock()
		if ok(devs) {
			return nil
		}
		if ended {
			return fmt.Errorf("ListAndWatch of %s ended: %v", e.Resource, e.streamErr)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the devices of %s: %w", e.Resource, ctx.Err())
		}
	}
}

// Health returns device ID -> health from the latest list.
func (e *Endpoint) Health() map[string]string {
	out := map[string]string{}
	for _, d := range e.Devices() {
		out[d.ID] = d.Health
	}
	return out
}
