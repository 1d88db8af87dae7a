package kubelettest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

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

	mu        sync.Mutex
	server    *grpc.Server
	endpoints map[string]*Endpoint
	regs      []*pluginapi.RegisterRequest
	reject    int
	rejected  int
}

// Start serves kubelet.sock in dir, creating dir if needed.
func Start(dir string) (*Kubelet, error) {
	k := &Kubelet{dir: dir, endpoints: map[string]*Endpoint{}}
	if err := k.listen(); err != nil {
		return nil, err
	}
	return k, nil
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
	k.mu.Lock()
	old, eps := k.server, k.endpoints
	k.server, k.endpoints, k.regs = nil, map[string]*Endpoint{}, nil
	k.mu.Unlock()
	if old != nil {
		old.Stop()
	}
	for _, e := range eps {
		e.close()
	}
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

// Register validates the request like the kubelet, connects back to the
// plugin and starts watching its devices.
func (k *Kubelet) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.mu.Lock()
	if k.reject > 0 {
		k.reject--
		k.rejected++
		k.mu.Unlock()
		return nil, errors.New("registration rejected by the test")
	}
	k.mu.Unlock()
	if req.Version != pluginapi.Version {
		return nil, fmt.Errorf("unsupported API version %q", req.Version)
	}
	if err := config.ValidResourceName(req.ResourceName); err != nil {
		return nil, fmt.Errorf("invalid resource name: %w", err)
	}
	if filepath.Base(req.Endpoint) != req.Endpoint {
		return nil, fmt.Errorf("endpoint %q is not a file name", req.Endpoint)
	}
	e, err := dial(filepath.Join(k.dir, req.Endpoint), req.ResourceName)
	if err != nil {
		return nil, err
	}
	opts, err := e.Client.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		e.close()
		return nil, fmt.Errorf("GetDevicePluginOptions: %w", err)
	}
	e.Options = opts
	e.watch()

	k.mu.Lock()
	defer k.mu.Unlock()
	if old := k.endpoints[req.ResourceName]; old != nil {
		old.close()
	}
	k.endpoints[req.ResourceName] = e
	k.regs = append(k.regs, req)
	return &pluginapi.Empty{}, nil
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

// Stop stops serving, closes every endpoint and removes kubelet.sock.
func (k *Kubelet) Stop() {
	k.mu.Lock()
	s := k.server
	k.server = nil
	eps := k.endpoints
	k.endpoints = map[string]*Endpoint{}
	k.mu.Unlock()
	if s != nil {
		s.Stop()
	}
	for _, e := range eps {
		e.close()
	}
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

	conn   *grpc.ClientConn
	cancel context.CancelFunc

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

func (e *Endpoint) watch() {
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	stream, err := e.Client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		e.mu.Lock()
		e.ended, e.streamErr = true, err
		close(e.changed)
		e.mu.Unlock()
		return
	}
	go func() {
		for {
			resp, err := stream.Recv()
			e.mu.Lock()
			if err != nil {
				e.ended, e.streamErr = true, err
				close(e.changed)
				e.mu.Unlock()
				return
			}
			e.devices = resp.Devices
			e.updates++
			close(e.changed)
			e.changed = make(chan struct{})
			e.mu.Unlock()
		}
	}()
}

func (e *Endpoint) close() {
	if e.cancel != nil {
		e.cancel()
	}
	_ = e.conn.Close()
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
