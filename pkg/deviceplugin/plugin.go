package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/backoff"
	"github.com/dri-cdi/dri-cdi/pkg/grpcstop"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// maxSocketPath is the longest unix socket path (sun_path is 108 bytes
// with the terminating NUL).
const maxSocketPath = 107

// plugin serves the device plugin API of one resource on its own socket.
// Its lifecycle fields are guarded by the Manager's mutex; the gRPC
// handlers only read the atomic state.
type plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	resource string
	socket   string
	delivery Delivery
	log      *logrus.Entry
	metrics  *Metrics

	state atomic.Pointer[state]

	servers  uint64 // servers started, for socket names
	server   *grpc.Server
	socketID fileID        // the socket file we created
	stop     chan struct{} // closed to end this server's ListAndWatch streams

	registered bool
	kubeletID  fileID          // kubelet.sock we registered with
	backoff    backoff.Backoff // between failed registrations
	retryAt    time.Time
}

// fileID identifies one incarnation of a file: a re-created file has a
// new inode or change time.
type fileID struct {
	dev, ino uint64
	ctime    unix.Timespec
}

func statID(path string) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return fileID{}, err
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino, ctime: st.Ctim}, nil //nolint:unconvert // Dev is narrower on some platforms
}

// setState publishes a new snapshot and wakes the ListAndWatch streams
// when the device list differs. It reports whether it did.
func (p *plugin) setState(next *state) bool {
	old := p.state.Load()
	if old != nil && proto.Equal(old.list, next.list) {
		next.changed = old.changed
		p.state.Store(next)
		return false
	}
	next.changed = make(chan struct{})
	p.state.Store(next)
	if old != nil {
		close(old.changed)
	}
	return true
}

// serve listens on the plugin's socket and serves in the background.
func (p *plugin) serve() error {
	if len(p.socket) > maxSocketPath {
		return fmt.Errorf("socket path %s is %d bytes, more than %d", p.socket, len(p.socket), maxSocketPath)
	}
	if err := os.Remove(p.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	l, err := net.Listen("unix", p.socket)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", p.socket, err)
	}
	// The kubelet may delete the file and we may re-create it; never let
	// closing an old listener unlink the new file.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	id, err := statID(p.socket)
	if err != nil {
		l.Close()
		return fmt.Errorf("stat %s: %w", p.socket, err)
	}
	s := grpc.NewServer()
	stop := make(chan struct{})
	pluginapi.RegisterDevicePluginServer(s, &endpoint{plugin: p, stop: stop})
	p.server, p.socketID, p.stop = s, id, stop
	go func() {
		if err := s.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			p.log.WithError(err).Error("device plugin server stopped")
			p.metrics.Error("server")
		}
	}()
	p.log.WithField("socket", p.socket).Info("serving device plugin")
	return nil
}

// socketOK reports whether the socket we serve on is still in place.
func (p *plugin) socketOK() bool {
	if p.server == nil {
		return false
	}
	id, err := statID(p.socket)
	return err == nil && id == p.socketID
}

// stopServer ends the server and every connection to it: streams end
// without a last message, and open calls get until the deadline to
// finish. Its socket is removed while it is still ours.
func (p *plugin) stopServer(deadline time.Duration) {
	if p.server == nil {
		return
	}
	ours := p.socketOK()
	close(p.stop)
	grpcstop.Stop(p.server, deadline)
	p.server = nil
	if ours {
		_ = os.Remove(p.socket)
	}
}

// GetDevicePluginOptions tells the kubelet that GetPreferredAllocation is
// available.
func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

// endpoint is the plugin as one server instance serves it: a restarted
// server gets a new endpoint, so ending the old one's streams leaves the
// new one's alone.
type endpoint struct {
	*plugin
	stop <-chan struct{}
}

// ListAndWatch sends the whole device list on connect and after every
// change. It never sends an empty list because the server stops.
func (e *endpoint) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	p, stop := e.plugin, e.stop
	st := p.state.Load()
	for {
		if err := s.Send(st.list); err != nil {
			return err
		}
		p.metrics.ListAndWatchSent(p.resource)
		select {
		case <-st.changed:
			st = p.state.Load()
		case <-s.Context().Done():
			return nil
		case <-stop:
			return nil
		}
	}
}

// Allocate answers from the precomputed snapshot; see state.allocate.
func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	st := p.state.Load()
	resp := &pluginapi.AllocateResponse{ContainerResponses: make([]*pluginapi.ContainerAllocateResponse, 0, len(req.ContainerRequests))}
	for _, cr := range req.ContainerRequests {
		r, err := st.allocate(cr.DevicesIds, p.delivery)
		if err != nil {
			p.metrics.AllocationError(p.resource, errorReason(err))
			p.log.WithError(err).WithField("devices", cr.DevicesIds).Warn("allocation refused")
			code := codes.InvalidArgument
			if errors.Is(err, ErrUnhealthyDevice) {
				code = codes.FailedPrecondition
			}
			return nil, status.Error(code, "allocate: "+err.Error())
		}
		p.metrics.Allocation(p.resource)
		resp.ContainerResponses = append(resp.ContainerResponses, r)
	}
	return resp, nil
}

// GetPreferredAllocation answers from the snapshot; see state.preferred.
func (p *plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	st := p.state.Load()
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.ContainerRequests {
		ids := st.preferred(cr.AvailableDeviceIDs, cr.MustIncludeDeviceIDs, int(cr.AllocationSize))
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
		p.metrics.PreferredAllocation(p.resource)
	}
	return resp, nil
}

// PreStartContainer is not used (PreStartRequired is false).
func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
