// Package podresourcestest runs a fake kubelet PodResources v1 server on a
// unix socket, for tests of code that asks the kubelet about allocations.
//
// It follows the kubelet's contract: Get answers one pod (NotFound for a
// pod it does not know, or the kubelet's plain error text when
// KubeletNotFound is set), List answers every pod, and
// GetAllocatableResources answers what SetAllocatable recorded. Get can be
// disabled the two ways real kubelets do (feature gate off, or an old
// kubelet without the method), and every answer can be delayed. DRA claim
// devices set with SetClaims are reported in the containers'
// DynamicResources, one entry per claim.
package podresourcestest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/dri-cdi/dri-cdi/pkg/podresources"
)

// GetMode says how the fake answers Get.
type GetMode int

const (
	// GetEnabled answers Get normally.
	GetEnabled GetMode = iota
	// GetDisabled answers like a kubelet with KubeletPodResourcesGet off.
	GetDisabled
	// GetUnimplemented answers like a kubelet that predates Get.
	GetUnimplemented
)

// Container is one container's allocation: resource name → device IDs.
type Container map[string][]string

// Server is a fake kubelet PodResources server.
type Server struct {
	socket string
	srv    *grpc.Server
	done   chan struct{}

	mu   sync.Mutex
	pods map[string]map[string]Container // "ns/name" → container → devices
	// claims are the DRA claim devices: "ns/name" → container → devices.
	claims  map[string]map[string][]podresources.ClaimDevice
	alloc   Container // allocatable devices
	delay   time.Duration
	getMode GetMode
	// kubeletNotFound makes Get answer an unknown pod the way the kubelet
	// does: codes.Unknown with "pod X in namespace Y not found".
	kubeletNotFound bool
	// rateLimited is how many of the next Get and List calls are rejected
	// the way the kubelet's rate limiter rejects them.
	rateLimited int

	gets, lists atomic.Int64
}

// Start serves a fake PodResources API on a new unix socket at path.
func Start(socket string) (*Server, error) {
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %s: %w", socket, err)
	}
	s := &Server{
		socket: socket,
		srv:    grpc.NewServer(),
		done:   make(chan struct{}),
		pods:   map[string]map[string]Container{},
		claims: map[string]map[string][]podresources.ClaimDevice{},
	}
	v1.RegisterPodResourcesListerServer(s.srv, &service{s: s})
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(l)
	}()
	return s, nil
}

// Socket returns the socket path.
func (s *Server) Socket() string { return s.socket }

// Stop stops serving, ending open calls, and removes the socket.
func (s *Server) Stop() {
	s.srv.Stop()
	<-s.done
	_ = os.Remove(s.socket)
}

// SetPod records the allocation of every container of a pod; a container
// without devices is given as an empty Container.
func (s *Server) SetPod(namespace, name string, containers map[string]Container) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[namespace+"/"+name] = containers
}

// SetClaims records the DRA claim devices the kubelet prepared for the
// containers of a pod recorded with SetPod, by container name. Like the
// kubelet, the fake reports one DynamicResource per claim (name and
// namespace), holding one ClaimResource per device, in the order given.
func (s *Server) SetClaims(namespace, name string, claims map[string][]podresources.ClaimDevice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims[namespace+"/"+name] = claims
}

// SetAllocatable records the devices the node advertises, by resource.
func (s *Server) SetAllocatable(devices Container) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alloc = devices
}

// RemovePod forgets a pod.
func (s *Server) RemovePod(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, namespace+"/"+name)
	delete(s.claims, namespace+"/"+name)
}

// SetDelay delays every answer by d, or until the call's deadline.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// SetGetMode sets how Get answers.
func (s *Server) SetGetMode(m GetMode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.getMode = m
}

// SetKubeletNotFound makes Get answer an unknown pod with the kubelet's
// plain error (codes.Unknown) instead of NotFound.
func (s *Server) SetKubeletNotFound(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kubeletNotFound = on
}

// Calls returns how many Get and List calls were answered or refused.
func (s *Server) Calls() (gets, lists int64) {
	return s.gets.Load(), s.lists.Load()
}

// SetRateLimited makes the next n Get or List calls fail with
// ResourceExhausted, as the kubelet answers calls over its rate limit.
func (s *Server) SetRateLimited(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimited = n
}

// enter starts answering a call as the kubelet would: it counts the call
// in calls (nil: not counted), refuses it while SetRateLimited says so,
// waits out SetDelay, and returns with s.mu held for the answer; the
// caller unlocks. On an error the lock is not held.
func (s *Server) enter(ctx context.Context, calls *atomic.Int64) error {
	if calls != nil {
		calls.Add(1)
	}
	s.mu.Lock()
	d := s.delay
	limited := s.rateLimited > 0
	if limited {
		s.rateLimited--
	}
	s.mu.Unlock()
	if limited {
		return status.Error(codes.ResourceExhausted, "rejected by rate limit")
	}
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	s.mu.Lock()
	return nil
}

func podResources(key string, containers map[string]Container, claims map[string][]podresources.ClaimDevice) *v1.PodResources {
	ns, name, _ := strings.Cut(key, "/")
	p := &v1.PodResources{Namespace: ns, Name: name}
	names := make([]string, 0, len(containers))
	for n := range containers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		cr := &v1.ContainerResources{Name: n}
		res := make([]string, 0, len(containers[n]))
		for r := range containers[n] {
			res = append(res, r)
		}
		sort.Strings(res)
		for _, r := range res {
			cr.Devices = append(cr.Devices, &v1.ContainerDevices{
				ResourceName: r,
				DeviceIds:    append([]string(nil), containers[n][r]...),
			})
		}
		cr.DynamicResources = dynamicResources(claims[n])
		p.Containers = append(p.Containers, cr)
	}
	return p
}

// dynamicResources groups claim devices by claim, as the kubelet's
// GetDynamicResources does.
func dynamicResources(devs []podresources.ClaimDevice) []*v1.DynamicResource {
	var out []*v1.DynamicResource
	byClaim := map[string]*v1.DynamicResource{}
	for _, d := range devs {
		key := d.Namespace + "/" + d.Claim
		dr, ok := byClaim[key]
		if !ok {
			dr = &v1.DynamicResource{ClaimName: d.Claim, ClaimNamespace: d.Namespace}
			byClaim[key] = dr
			out = append(out, dr)
		}
		cr := &v1.ClaimResource{DriverName: d.Driver, PoolName: d.Pool, DeviceName: d.Device}
		if d.ShareID != "" {
			cr.ShareId = &d.ShareID
		}
		for _, name := range d.CDIDevices {
			cr.CdiDevices = append(cr.CdiDevices, &v1.CDIDevice{Name: name})
		}
		dr.ClaimResources = append(dr.ClaimResources, cr)
	}
	return out
}

type service struct {
	v1.UnimplementedPodResourcesListerServer
	s *Server
}

func (v *service) Get(ctx context.Context, req *v1.GetPodResourcesRequest) (*v1.GetPodResourcesResponse, error) {
	s := v.s
	if err := s.enter(ctx, &s.gets); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	switch s.getMode {
	case GetDisabled:
		return nil, errors.New("PodResources API Get method disabled")
	case GetUnimplemented:
		return nil, status.Error(codes.Unimplemented, "method Get not implemented")
	}
	key := req.GetPodNamespace() + "/" + req.GetPodName()
	ctrs, ok := s.pods[key]
	if !ok {
		if s.kubeletNotFound {
			return nil, fmt.Errorf("pod %s in namespace %s not found", req.GetPodName(), req.GetPodNamespace())
		}
		return nil, status.Errorf(codes.NotFound, "pod %s in namespace %s not found", req.GetPodName(), req.GetPodNamespace())
	}
	return &v1.GetPodResourcesResponse{PodResources: podResources(key, ctrs, s.claims[key])}, nil
}

func (v *service) List(ctx context.Context, _ *v1.ListPodResourcesRequest) (*v1.ListPodResourcesResponse, error) {
	s := v.s
	if err := s.enter(ctx, &s.lists); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.pods))
	for k := range s.pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rsp := &v1.ListPodResourcesResponse{}
	for _, k := range keys {
		rsp.PodResources = append(rsp.PodResources, podResources(k, s.pods[k], s.claims[k]))
	}
	return rsp, nil
}

func (v *service) GetAllocatableResources(ctx context.Context, _ *v1.AllocatableResourcesRequest) (*v1.AllocatableResourcesResponse, error) {
	s := v.s
	if err := s.enter(ctx, nil); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	byRes := s.alloc
	res := make([]string, 0, len(byRes))
	for r := range byRes {
		res = append(res, r)
	}
	sort.Strings(res)
	rsp := &v1.AllocatableResourcesResponse{}
	for _, r := range res {
		ids := append([]string(nil), byRes[r]...)
		sort.Strings(ids)
		rsp.Devices = append(rsp.Devices, &v1.ContainerDevices{ResourceName: r, DeviceIds: ids})
	}
	return rsp, nil
}
