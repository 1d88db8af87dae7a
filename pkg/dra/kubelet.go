package dra

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/types"
	healthpb "k8s.io/kubelet/pkg/apis/dra-health/v1"
	healthpbv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"github.com/dri-cdi/dri-cdi/pkg/grpcstop"
)

// The kubelet's side of a DRA plugin, served without the kubeletplugin
// helper of k8s.io/dynamic-resource-allocation: that helper takes
// client-go's typed clientset, whose import alone keeps every API group
// in the binary (docs/performance.md, "The DRA hot path").
//
//   - The registration socket in the registrar dir: the kubelet's plugin
//     watcher finds it, calls GetInfo (type DRAPlugin, our name, the DRA
//     socket, the services offered) and then NotifyRegistrationStatus.
//   - The DRA socket in the plugin data dir: v1.DRAPlugin (and v1beta1
//     for kubelets before 1.34, through the kubelet API's own wrapper),
//     and v1.DRAResourceHealth (and v1alpha1).
//
// The socket names are the helper's, so that an update from a version
// that used it replaces the same files and doctor finds them:
// "<driver>-reg.sock" and "dra.sock", or with rolling updates
// "<driver>-<pod UID>-reg.sock" (the UID replaced by a hash of it when
// the path would not fit a socket address) and "dra-<pod UID>.sock".

// unixPathMax is the longest path a socket address holds.
const unixPathMax = 108

// serverStopTimeout bounds how long a stop waits for the kubelet's open
// calls before it cuts them.
const serverStopTimeout = 5 * time.Second

// registrationSocket is the name of the registration socket in
// registrarDir.
func registrationSocket(registrarDir, podUID string) string {
	if podUID == "" {
		return config.DRARegistrationSocket
	}
	full := DriverName + "-" + podUID + "-reg.sock"
	if len(filepath.Join(registrarDir, full)) <= unixPathMax {
		return full
	}
	sum := sha256.Sum256([]byte(podUID))
	return DriverName + "-" + base64.RawURLEncoding.EncodeToString(sum[:8]) + "-reg.sock"
}

// draSocket is the name of the DRA socket in the plugin data dir.
func draSocket(podUID string) string {
	if podUID == "" {
		return "dra.sock"
	}
	return "dra-" + podUID + ".sock"
}

// kubeletServer is the two gRPC servers and their sockets.
type kubeletServer struct {
	draPath, regPath string
	dra, reg         *grpc.Server
	// status is the kubelet's last NotifyRegistrationStatus, nil before.
	status atomic.Pointer[registerapi.RegistrationStatus]
	// quit ends the kubelet's health streams, which would otherwise hold
	// a graceful stop until its timeout.
	quit chan struct{}
	wg   sync.WaitGroup
}

// listen binds a fresh socket at path: one left by an earlier process
// of the same name is removed first.
func listen(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove the old socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return l, nil
}

// startKubeletServer serves the DRA socket, then the registration socket
// (so that the kubelet, once it finds the latter, can reach the former).
// A server that stops serving on its own is a fatal error of Run.
func (d *Driver) startKubeletServer() (*kubeletServer, error) {
	if err := os.MkdirAll(d.opts.PluginDataDir, pluginDataDirMode); err != nil {
		return nil, fmt.Errorf("create plugin data dir %s: %w", d.opts.PluginDataDir, err)
	}
	s := &kubeletServer{
		draPath: filepath.Join(d.opts.PluginDataDir, draSocket(d.opts.PodUID)),
		regPath: filepath.Join(d.opts.RegistrarDir, registrationSocket(d.opts.RegistrarDir, d.opts.PodUID)),
		quit:    make(chan struct{}),
	}
	var opts []grpc.ServerOption
	if d.trace != nil {
		opts = append(opts, grpc.UnaryInterceptor(d.trace.timing))
	}
	draL, err := listen(s.draPath)
	if err != nil {
		return nil, err
	}
	s.dra = grpc.NewServer(opts...)
	svc := &draService{d: d}
	drapb.RegisterDRAPluginServer(s.dra, svc)
	drapbv1beta1.RegisterDRAPluginServer(s.dra, drapbv1beta1.V1ServerWrapper{DRAPluginServer: svc})
	health := &healthService{d: d, quit: s.quit}
	healthpb.RegisterDRAResourceHealthServer(s.dra, health)
	healthpbv1alpha1.RegisterDRAResourceHealthServer(s.dra, healthpb.V1ServerWrapper{Server: health})
	s.serve(d, s.dra, draL, "DRA gRPC server")
	regL, err := listen(s.regPath)
	if err != nil {
		s.stop()
		return nil, err
	}
	s.reg = grpc.NewServer(opts...)
	registerapi.RegisterRegistrationServer(s.reg, &registrar{s: s, endpoint: s.draPath, log: d.log})
	s.serve(d, s.reg, regL, "registration gRPC server")
	return s, nil
}

func (s *kubeletServer) serve(d *Driver, srv *grpc.Server, l net.Listener, name string) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			d.fail(fmt.Errorf("%s on %s: %w", name, l.Addr(), err))
		}
	}()
}

// stop removes the registration socket first (the kubelet deregisters
// the plugin), lets open calls finish for a while, and removes the DRA
// socket.
func (s *kubeletServer) stop() {
	if s == nil {
		return
	}
	close(s.quit)
	for _, srv := range []*grpc.Server{s.reg, s.dra} {
		if srv != nil {
			grpcstop.Stop(srv, serverStopTimeout)
		}
	}
	s.wg.Wait()
	for _, p := range []string{s.regPath, s.draPath} {
		_ = os.Remove(p)
	}
}

// registrar answers the kubelet's plugin watcher.
type registrar struct {
	registerapi.UnsafeRegistrationServer
	s        *kubeletServer
	endpoint string
	log      *logrus.Entry
}

// supportedServices are the services the DRA socket offers, newest
// first.
var supportedServices = []string{
	drapb.DRAPluginService, drapbv1beta1.DRAPluginService,
	healthpb.DRAResourceHealthService, healthpbv1alpha1.DRAResourceHealthService,
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type: registerapi.DRAPlugin, Name: DriverName, Endpoint: r.endpoint, SupportedVersions: supportedServices,
	}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.s.status.Store(st)
	if !st.PluginRegistered {
		r.log.WithField("reason", st.Error).Error("the kubelet refused the registration")
		return &registerapi.RegistrationStatusResponse{}, nil
	}
	r.log.Info("registered with the kubelet")
	return &registerapi.RegistrationStatusResponse{}, nil
}

// draService is v1.DRAPlugin.
type draService struct {
	drapb.UnsafeDRAPluginServer
	d *Driver
}

// NodePrepareResources reads each claim from the API server (the
// kubelet sends only its name and UID), then prepares those it could
// read. A claim that cannot be read, is not allocated, or is not the
// claim of that UID any more gets its own error; a checkpoint that cannot
// be read or saved fails the call.
func (s *draService) NodePrepareResources(ctx context.Context, req *drapb.NodePrepareResourcesRequest) (*drapb.NodePrepareResourcesResponse, error) {
	resp := &drapb.NodePrepareResourcesResponse{Claims: make(map[string]*drapb.NodePrepareResourceResponse, len(req.Claims))}
	claims := s.d.getClaims(ctx, req.Claims, func(uid string, err error) {
		resp.Claims[uid] = &drapb.NodePrepareResourceResponse{Error: err.Error()}
	})
	if len(claims) == 0 {
		return resp, nil
	}
	results, err := s.d.PrepareResourceClaims(ctx, claims)
	if err != nil {
		return nil, fmt.Errorf("prepare resource claims: %w", err)
	}
	for uid, r := range results {
		out := &drapb.NodePrepareResourceResponse{}
		if r.Err != nil {
			out.Error = r.Err.Error()
		}
		for _, dev := range r.Devices {
			out.Devices = append(out.Devices, &drapb.Device{
				RequestNames: baseRequests(dev.Requests), PoolName: dev.PoolName, DeviceName: dev.DeviceName,
				CdiDeviceIds: dev.CDIDeviceIDs, ShareId: (*string)(dev.ShareID),
			})
		}
		resp.Claims[string(uid)] = out
	}
	return resp, nil
}

// baseRequests are the names of the claim's requests: an allocation
// result of a prioritized list names the subrequest the scheduler chose
// ("<request>/<subrequest>"), and the kubelet matches a container's
// claim request by the request's own name.
func baseRequests(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i], _, _ = strings.Cut(n, "/")
	}
	return out
}

// getClaims reads the claims, all at once when there are several; each
// one that fails is given to failed with the reason, and left out.
func (d *Driver) getClaims(ctx context.Context, refs []*drapb.Claim, failed func(uid string, err error)) []*draapi.ResourceClaim {
	out := make([]*draapi.ResourceClaim, len(refs))
	errs := make([]error, len(refs))
	get := func(i int) {
		ref := refs[i]
		c, err := d.opts.API.GetClaim(ctx, ref.Namespace, ref.Name)
		switch {
		case err != nil:
			err = fmt.Errorf("claim %s/%s: read it from the API server: %w", ref.Namespace, ref.Name, err)
		case c.UID != types.UID(ref.Uid):
			err = fmt.Errorf("claim %s/%s: the kubelet asked for UID %s, the API server has %s (the claim was replaced)", ref.Namespace, ref.Name, ref.Uid, c.UID)
		case c.Status.Allocation == nil:
			err = fmt.Errorf("claim %s/%s (%s): %w", ref.Namespace, ref.Name, ref.Uid, ErrNotAllocated)
		}
		out[i], errs[i] = c, err
	}
	if len(refs) == 1 {
		get(0)
	} else {
		var wg sync.WaitGroup
		for i := range refs {
			wg.Go(func() { get(i) })
		}
		wg.Wait()
	}
	claims := out[:0]
	for i, c := range out {
		if errs[i] != nil {
			label := "get_claim"
			if errors.Is(errs[i], ErrNotAllocated) {
				label = "not_allocated"
			}
			d.opts.Metrics.prepare(label, 1)
			d.log.WithError(errs[i]).Warn("claim not prepared")
			failed(refs[i].Uid, errs[i])
			continue
		}
		claims = append(claims, c)
	}
	return claims
}

// NodeUnprepareResources forgets the claims.
func (s *draService) NodeUnprepareResources(ctx context.Context, req *drapb.NodeUnprepareResourcesRequest) (*drapb.NodeUnprepareResourcesResponse, error) {
	refs := make([]ClaimRef, len(req.Claims))
	for i, c := range req.Claims {
		refs[i] = ClaimRef{Namespace: c.Namespace, Name: c.Name, UID: types.UID(c.Uid)}
	}
	results, err := s.d.UnprepareResourceClaims(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("unprepare resource claims: %w", err)
	}
	resp := &drapb.NodeUnprepareResourcesResponse{Claims: make(map[string]*drapb.NodeUnprepareResourceResponse, len(results))}
	for uid, err := range results {
		out := &drapb.NodeUnprepareResourceResponse{}
		if err != nil {
			out.Error = err.Error()
		}
		resp.Claims[string(uid)] = out
	}
	return resp, nil
}

// healthService is v1.DRAResourceHealth: the kubelet's stream of every
// published device's health.
type healthService struct {
	healthpb.UnsafeDRAResourceHealthServer
	d    *Driver
	quit <-chan struct{}
}

func (h *healthService) NodeWatchResources(_ *healthpb.NodeWatchResourcesRequest, stream healthpb.DRAResourceHealth_NodeWatchResourcesServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-h.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	return h.d.watchHealth(ctx, stream.Send)
}
