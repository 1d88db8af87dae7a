package deviceplugin

import (
	"context"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/logging/loggingtest"
	"github.com/dri-cdi/dri-cdi/pkg/metrics"
)

const (
	wait = 10 * time.Second
	tick = time.Millisecond
	res  = "dri-cdi.dev/i915"
)

func testLog(t testing.TB) *logrus.Entry {
	return loggingtest.New(t, logrus.DebugLevel)
}

type env struct {
	m       *Manager
	k       *kubelettest.Kubelet
	dir     string
	metrics *Metrics
	cancel  context.CancelFunc
	done    chan error
}

// start runs a manager against a fake kubelet in a fresh dir. With
// kubelet false the dir has no kubelet.sock yet.
func start(t testing.TB, delivery Delivery, kubelet bool) *env {
	t.Helper()
	return startLogged(t, delivery, kubelet, testLog(t))
}

// startLogged is start with the manager logging to log; benchmarks pass
// one that logs only errors, so that logging is not what they measure.
func startLogged(t testing.TB, delivery Delivery, kubelet bool, log *logrus.Entry) *env {
	t.Helper()
	return startWith(t, kubelet, Options{Delivery: delivery, Log: log})
}

// agentLabel marks the goroutines of the manager under test, to count
// them apart from the fake kubelet's (reregister_test.go).
var agentLabel = pprof.Labels("side", "agent")

// startWith runs a manager with o, its dir, CDI names and metrics filled
// in; with kubelet false the dir has no kubelet.sock yet. The kubelet in
// e.k when the test ends is stopped.
func startWith(t testing.TB, kubelet bool, o Options) *env {
	t.Helper()
	e := &env{dir: kubelettest.ShortDir(t), metrics: NewMetrics(metrics.NewAgent("test")), done: make(chan error, 1)}
	if kubelet {
		k, err := kubelettest.Start(e.dir)
		require.NoError(t, err)
		e.k = k
		t.Cleanup(func() { e.k.Stop() })
	}
	o.KubeletDir, o.Name, o.Metrics = e.dir, testName, e.metrics
	m, err := NewManager(o)
	require.NoError(t, err)
	e.m = m
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	pprof.Do(ctx, agentLabel, func(ctx context.Context) {
		go func() { e.done <- m.Run(ctx) }()
	})
	t.Cleanup(func() {
		cancel()
		<-e.done
	})
	return e
}

// endpoint waits until the resource has registered n times and its
// stream delivered a list, and returns the kubelet's endpoint.
func (e *env) endpoint(t testing.TB, resource string, n int) *kubelettest.Endpoint {
	t.Helper()
	require.Eventually(t, func() bool {
		ep := e.k.Endpoint(resource)
		return e.k.RegistrationsOf(resource) >= n && ep != nil && ep.Updates() > 0
	}, wait, tick)
	return e.k.Endpoint(resource)
}

func pool(resource string, replicas int, cards ...drm.Card) config.Pool {
	return config.Pool{Resource: resource, Replicas: replicas, Cards: cards}
}

func TestRegisterAndServe(t *testing.T) {
	a, b := testCard("0000:03:00.0", 0, 0), testCard("0000:00:02.0", 1, -1)
	tests := map[string]struct {
		delivery Delivery
		check    func(t *testing.T, r *pluginapi.ContainerAllocateResponse)
	}{
		"cdi-cri": {delivery: DeliveryCDICRI, check: func(t *testing.T, r *pluginapi.ContainerAllocateResponse) {
			require.Len(t, r.CdiDevices, 1)
			require.Equal(t, "dri-cdi.dev/gpu=0000:03:00.0", r.CdiDevices[0].Name)
			require.Empty(t, r.Devices)
		}},
		"nri": {delivery: DeliveryNRI, check: func(t *testing.T, r *pluginapi.ContainerAllocateResponse) {
			require.Empty(t, r.CdiDevices)
			require.Empty(t, r.Devices)
		}},
		"device-specs": {delivery: DeliveryDeviceSpecs, check: func(t *testing.T, r *pluginapi.ContainerAllocateResponse) {
			require.Empty(t, r.CdiDevices)
			require.Equal(t, []*pluginapi.DeviceSpec{
				{ContainerPath: "/dev/dri/card0", HostPath: "/host/dev/dri/card0", Permissions: "rw"},
				{ContainerPath: "/dev/dri/renderD128", HostPath: "/host/dev/dri/renderD128", Permissions: "rw"},
			}, r.Devices)
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := start(t, tc.delivery, true)
			require.NoError(t, e.m.Update([]config.Pool{pool(res, 1, a, b)}, nil))

			ep := e.endpoint(t, res, 1)
			require.True(t, ep.Options.GetPreferredAllocationAvailable)
			require.Equal(t, filepath.Base(e.m.SocketPath(res)), filepath.Base(ep.Socket))
			require.Equal(t, map[string]string{a.ID: pluginapi.Healthy, b.ID: pluginapi.Healthy}, ep.Health())
			require.Eventually(t, func() bool { return e.m.Ready() == nil }, wait, tick)

			ctx := context.Background()
			resp, err := ep.Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{a.ID}}}})
			require.NoError(t, err)
			require.Len(t, resp.ContainerResponses, 1)
			key, value := alloc.Annotation(res, []string{a.ID})
			require.Equal(t, map[string]string{key: value}, resp.ContainerResponses[0].Annotations)
			tc.check(t, resp.ContainerResponses[0])

			_, err = ep.Client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"0000:09:00.0"}}}})
			require.Equal(t, codes.InvalidArgument, status.Code(err))
			require.ErrorContains(t, err, `unknown device "0000:09:00.0" for dri-cdi.dev/i915`)

			pref, err := ep.Client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
				{AvailableDeviceIDs: []string{a.ID, b.ID}, MustIncludeDeviceIDs: []string{b.ID}, AllocationSize: 2},
			}})
			require.NoError(t, err)
			require.Equal(t, []string{b.ID, a.ID}, pref.ContainerResponses[0].DeviceIDs)

			require.NoError(t, testutil.GatherAndCompare(e.metrics.loop.Registry, strings.NewReader(`
# HELP dri_cdi_agent_allocations_total Container allocations answered successfully, per resource.
# TYPE dri_cdi_agent_allocations_total counter
dri_cdi_agent_allocations_total{resource="dri-cdi.dev/i915"} 1
# HELP dri_cdi_agent_allocation_errors_total Container allocations refused, per resource and reason.
# TYPE dri_cdi_agent_allocation_errors_total counter
dri_cdi_agent_allocation_errors_total{reason="unknown_device",resource="dri-cdi.dev/i915"} 1
# HELP dri_cdi_agent_registered 1 while the resource is registered with the running kubelet, else 0.
# TYPE dri_cdi_agent_registered gauge
dri_cdi_agent_registered{resource="dri-cdi.dev/i915"} 1
`), "dri_cdi_agent_allocations_total", "dri_cdi_agent_allocation_errors_total", "dri_cdi_agent_registered"))
		})
	}
}

func TestHealthFlipAndRecovery(t *testing.T) {
	a, b := testCard("0000:03:00.0", 0, 0), testCard("0000:00:02.0", 1, 0)
	e := start(t, DeliveryCDICRI, true)
	pools := []config.Pool{pool(res, 2, a, b)}
	require.NoError(t, e.m.Update(pools, nil))
	ep := e.endpoint(t, res, 1)

	require.NoError(t, e.m.Update(pools, map[string]bool{a.ID: true}))
	require.Eventually(t, func() bool {
		return ep.Health()["0000:03:00.0::1"] == pluginapi.Unhealthy && ep.Health()["0000:00:02.0::1"] == pluginapi.Healthy
	}, wait, tick)
	_, err := ep.Client.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"0000:03:00.0::0"}}}})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))

	require.NoError(t, e.m.Update(pools, nil))
	require.Eventually(t, func() bool { return ep.Health()["0000:03:00.0::1"] == pluginapi.Healthy }, wait, tick)
	_, err = ep.Client.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"0000:03:00.0::0"}}}})
	require.NoError(t, err)
	require.Equal(t, 1, e.k.RegistrationsOf(res), "a health change needs no new registration")
}

func TestUnchangedListIsNotResent(t *testing.T) {
	a := testCard("0000:03:00.0", 0, 0)
	e := start(t, DeliveryCDICRI, true)
	require.NoError(t, e.m.Update([]config.Pool{pool(res, 1, a)}, nil))
	ep := e.endpoint(t, res, 1)
	moved := a
	moved.Name = "card7" // not part of the device list
	require.NoError(t, e.m.Update([]config.Pool{pool(res, 1, moved)}, nil))
	b := testCard("0000:04:00.0", 1, 0)
	require.NoError(t, e.m.Update([]config.Pool{pool(res, 1, moved, b)}, nil))
	require.Eventually(t, func() bool { return len(ep.Devices()) == 2 }, wait, tick)
	require.Equal(t, 2, ep.Updates(), "the unchanged list was sent again")
}

func TestPoolLifecycle(t *testing.T) {
	a := testCard("0000:03:00.0", 0, 0)
	e := start(t, DeliveryCDICRI, true)
	other := "gpu.intel.com/i915"

	// A configured pool without cards is not served.
	require.NoError(t, e.m.Update([]config.Pool{pool(other, 1)}, nil))
	require.Empty(t, e.m.Resources())
	require.NoError(t, e.m.Ready())

	// Its first card starts it.
	require.NoError(t, e.m.Update([]config.Pool{pool(other, 1, a)}, nil))
	ep := e.endpoint(t, other, 1)
	require.Equal(t, []string{other}, e.m.Resources())

	// Losing every card keeps it served, with an empty list.
	require.NoError(t, e.m.Update(nil, nil))
	require.Eventually(t, func() bool { return ep.Updates() == 2 && len(ep.Devices()) == 0 }, wait, tick)
	require.False(t, ep.Ended())
	require.Eventually(t, func() bool { return e.m.Ready() == nil }, wait, tick)
	require.FileExists(t, e.m.SocketPath(other))

	// The card returns on the same stream.
	require.NoError(t, e.m.Update([]config.Pool{pool(other, 1, a)}, nil))
	require.Eventually(t, func() bool { return len(ep.Devices()) == 1 }, wait, tick)
	require.Equal(t, 1, e.k.RegistrationsOf(other))
}

func TestKubeletRestart(t *testing.T) {
	a := testCard("0000:03:00.0", 0, 0)
	for name, wipe := range map[string]bool{"sockets deleted": false, "dir wiped": true} {
		t.Run(name, func(t *testing.T) {
			e := start(t, DeliveryCDICRI, true)
			require.NoError(t, e.m.Update([]config.Pool{pool(res, 1, a)}, nil))
			old := e.endpoint(t, res, 1)

			require.NoError(t, e.k.Restart(wipe))
			ep := e.endpoint(t, res, 2)
			require.NotSame(t, old, ep)
			require.Equal(t, map[string]string{a.ID: pluginapi.Healthy}, ep.Health())
			require.FileExists(t, e.m.SocketPath(res))
			require.Eventually(t, func() bool { return e.m.Ready() == nil }, wait, tick)
			_, err := ep.Client.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{a.ID}}}})
			require.NoError(t, err)
		})
	}
}

// TestKubeletSocketRecreated covers a kubelet that comes back without
// deleting our socket: the new kubelet.sock alone must cause a new
// registration, whether it was absent for a while or replaced in one step.
func TestKubeletSocketRecreated(t *testing.T) {
	a := testCard("0000:03:00.0", 0, 0)
	tests := map[string]func(e *env) error{
		"stopped and started": func(e *env) error {
			e.k.Stop()
			k, err := kubelettest.Start(e.dir)
			if err == nil {
				t.Cleanup(k.Stop)
				e.k = k
			}
			return err
		},
		"replaced atomically": func(e *env) error { return e.k.Replace() },
	}
	for name, restart := range tests {
		t.Run(name, func(t *testing.T) {
			e := start(t, DeliveryCDICRI, true)
			require.NoError(t, e.m.Update([]config.Pool{pool(res, 1, a)}, nil))
			e.endpoint(t, res, 1)
			require.NoError(t, restart(e))
			ep := e.endpoint(t, res, 1)
			require.Equal(t, map[string]string{a.ID: pluginapi.Healthy}, ep.Health())
		})
	}
}

func TestRegistrationRetriesWithBackoff(t *testing.T) {
	a := testCard("0000:03:00.0", 0, 0)
	e := start(t, DeliveryCDICRI, true)
	e.k.RejectNext(3)
	require.NoError(t, e.m.Update([]config.Pool{pool(res, 1, a)}, nil))
	// Nothing changes in the directory after the first attempt: only the
	// retry timer can bring the registration through.
	ep := e.endpoint(t, res, 1)
	require.Equal(t, 3, e.k.Rejected())
	require.Len(t, ep.Devices(), 1)
	require.Eventually(t, func() bool { return e.m.Ready() == nil }, wait, tick)
	require.NoError(t, testutil.GatherAndCompare(e.metrics.loop.Registry, strings.NewReader(`
# HELP dri_cdi_agent_registrations_total Registration attempts with the kubelet, per resource and result (success, error).
# TYPE dri_cdi_agent_registrations_total counter
dri_cdi_agent_registrations_total{resource="dri-cdi.dev/i915",result="error"} 3
dri_cdi_agent_registrations_total{resource="dri-cdi.dev/i915",result="success"} 1
`), "dri_cdi_agent_registrations_total"))
}

func TestOurSocketRemoved(t *testing.T) {
	a := testCard("0000:03:00.0", 0, 0)
	e := start(t, DeliveryNRI, true)
	require.NoError(t, e.m.Update([]config.Pool{pool(res, 1, a)}, nil))
	e.endpoint(t, res, 1)
	require.NoError(t, os.Remove(e.m.SocketPath(res)))
	ep := e.endpoint(t, res, 2)
	require.Equal(t, map[string]string{a.ID: pluginapi.Healthy}, ep.Health())
	require.FileExists(t, e.m.SocketPath(res))
}

func TestKubeletArrivesLater(t *testing.T) {
	a := testCard("0000:03:00.0", 0, 0)
	for name, makeDir := range map[string]bool{"dir exists": true, "dir missing": false} {
		t.Run(name, func(t *testing.T) {
			e := start(t, DeliveryCDICRI, false)
			if !makeDir {
				require.NoError(t, os.Remove(e.dir))
			}
			err := e.m.Update([]config.Pool{pool(res, 1, a)}, nil)
			if makeDir {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, "serve dri-cdi.dev/i915")
			}
			require.ErrorContains(t, e.m.Ready(), "not registered with the kubelet: dri-cdi.dev/i915")

			k, err := kubelettest.Start(e.dir)
			require.NoError(t, err)
			t.Cleanup(k.Stop)
			e.k = k
			ep := e.endpoint(t, res, 1)
			require.Len(t, ep.Devices(), 1)
			require.Eventually(t, func() bool { return e.m.Ready() == nil }, wait, tick)
		})
	}
}

func TestShutdown(t *testing.T) {
	a := testCard("0000:03:00.0", 0, 0)
	e := start(t, DeliveryCDICRI, true)
	require.NoError(t, e.m.Update([]config.Pool{pool(res, 1, a)}, nil))
	ep := e.endpoint(t, res, 1)

	e.cancel()
	require.NoError(t, <-e.done)
	e.done <- nil // for the cleanup
	require.NoFileExists(t, e.m.SocketPath(res))
	require.Eventually(t, ep.Ended, wait, tick)
	require.Len(t, ep.Devices(), 1, "the last list must not be empty")
	require.Equal(t, 1, ep.Updates())
	require.NoError(t, e.m.Update(nil, nil), "updates after shutdown are ignored")
	require.NoFileExists(t, e.m.SocketPath(res))
}

func TestSocketPath(t *testing.T) {
	m, err := NewManager(Options{KubeletDir: "/var/lib/kubelet/device-plugins", Delivery: DeliveryNRI, Instance: "abcd1234"})
	require.NoError(t, err)
	require.Equal(t, "/var/lib/kubelet/device-plugins/dri-cdi-dri-cdi.dev_i915-abcd1234-1.sock", m.socketPath("dri-cdi.dev/i915", 1))
	require.Equal(t, "/var/lib/kubelet/device-plugins/dri-cdi-dri-cdi.dev_i915-abcd1234-2.sock", m.socketPath("dri-cdi.dev/i915", 2))
	long := m.socketPath("a-very-long-domain-name.example.com/an-equally-long-resource-name-for-gpus", 9_999_999_999)
	require.LessOrEqual(t, len(long), maxSocketPath)
	require.NotEqual(t, long, m.socketPath("a-very-long-domain-name.example.com/an-equally-long-resource-name-for-gpuz", 9_999_999_999))
	require.Empty(t, m.SocketPath(res), "not served")

	m2, err := NewManager(Options{KubeletDir: "/k", Delivery: DeliveryNRI})
	require.NoError(t, err)
	m3, err := NewManager(Options{KubeletDir: "/k", Delivery: DeliveryNRI})
	require.NoError(t, err)
	require.NotEqual(t, m2.socketPath(res, 1), m3.socketPath(res, 1), "socket names are unique per instance")
}

func TestNewManagerErrors(t *testing.T) {
	tests := map[string]struct {
		opts    Options
		wantErr string
	}{
		"no dir":          {opts: Options{Delivery: DeliveryNRI}, wantErr: "kubelet dir is empty"},
		"bad delivery":    {opts: Options{KubeletDir: "/k", Delivery: "cdi"}, wantErr: `invalid delivery mode "cdi"`},
		"cdi-cri no name": {opts: Options{KubeletDir: "/k", Delivery: DeliveryCDICRI}, wantErr: "needs a CDI name function"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := NewManager(tc.opts)
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}
