package podresources_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
)

func startFake(t testing.TB) *podresourcestest.Server {
	t.Helper()
	s, err := podresourcestest.Start(filepath.Join(kubelettest.ShortDir(t), "kubelet.sock"))
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	s.SetPod("default", "gpu", map[string]podresourcestest.Container{
		"app":     {"dri-cdi.dev/i915": {"0000:00:02.0"}, "example.com/nic": {"eth1"}},
		"sidecar": {},
	})
	return s
}

func newClient(t testing.TB, socket string, opts ...podresources.Option) *podresources.Client {
	t.Helper()
	c, err := podresources.New(socket, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestContainerDevices(t *testing.T) {
	app := map[string][]string{"dri-cdi.dev/i915": {"0000:00:02.0"}, "example.com/nic": {"eth1"}}
	tests := map[string]struct {
		setup     func(*podresourcestest.Server)
		ns, pod   string
		container string
		want      map[string][]string
		wantErr   error
		wantGets  int64
		wantLists int64
	}{
		"get": {
			ns: "default", pod: "gpu", container: "app",
			want: app, wantGets: 1,
		},
		"container without devices": {
			ns: "default", pod: "gpu", container: "sidecar",
			want: map[string][]string{}, wantGets: 1,
		},
		"unknown container": {
			ns: "default", pod: "gpu", container: "nope",
			wantErr: podresources.ErrContainerNotFound, wantGets: 1,
		},
		"unknown pod (NotFound)": {
			ns: "default", pod: "other", container: "app",
			wantErr: podresources.ErrPodNotFound, wantGets: 1,
		},
		"unknown pod (kubelet's plain error)": {
			setup: func(s *podresourcestest.Server) { s.SetKubeletNotFound(true) },
			ns:    "default", pod: "other", container: "app",
			wantErr: podresources.ErrPodNotFound, wantGets: 1,
		},
		"same name in another namespace": {
			ns: "kube-system", pod: "gpu", container: "app",
			wantErr: podresources.ErrPodNotFound, wantGets: 1,
		},
		"get disabled falls back to list": {
			setup: func(s *podresourcestest.Server) { s.SetGetMode(podresourcestest.GetDisabled) },
			ns:    "default", pod: "gpu", container: "app",
			want: app, wantGets: 1, wantLists: 1,
		},
		"get unimplemented falls back to list": {
			setup: func(s *podresourcestest.Server) { s.SetGetMode(podresourcestest.GetUnimplemented) },
			ns:    "default", pod: "gpu", container: "app",
			want: app, wantGets: 1, wantLists: 1,
		},
		"list does not know the pod": {
			setup: func(s *podresourcestest.Server) { s.SetGetMode(podresourcestest.GetDisabled) },
			ns:    "default", pod: "other", container: "app",
			wantErr: podresources.ErrPodNotFound, wantGets: 1, wantLists: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := startFake(t)
			if tc.setup != nil {
				tc.setup(s)
			}
			c := newClient(t, s.Socket())
			got, err := c.ContainerDevices(context.Background(), tc.ns, tc.pod, tc.container)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				require.Contains(t, err.Error(), tc.ns+"/"+tc.pod)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
			}
			gets, lists := s.Calls()
			require.Equal(t, tc.wantGets, gets, "Get calls")
			require.Equal(t, tc.wantLists, lists, "List calls")
		})
	}
}

func TestListRememberedAfterGetDisabled(t *testing.T) {
	s := startFake(t)
	s.SetGetMode(podresourcestest.GetDisabled)
	c := newClient(t, s.Socket())
	for range 3 {
		_, err := c.ContainerDevices(context.Background(), "default", "gpu", "app")
		require.NoError(t, err)
	}
	gets, lists := s.Calls()
	require.Equal(t, int64(1), gets)
	require.Equal(t, int64(3), lists)
}

func TestSlowKubeletTimesOut(t *testing.T) {
	s := startFake(t)
	s.SetDelay(time.Minute)
	c := newClient(t, s.Socket(), podresources.WithTimeout(50*time.Millisecond))
	_, err := c.ContainerDevices(context.Background(), "default", "gpu", "app")
	require.Error(t, err)
	require.NotErrorIs(t, err, podresources.ErrPodNotFound)
	require.Contains(t, err.Error(), "DeadlineExceeded")
}

func TestKubeletDownThenUp(t *testing.T) {
	socket := filepath.Join(kubelettest.ShortDir(t), "kubelet.sock")
	c := newClient(t, socket)

	_, err := c.ContainerDevices(context.Background(), "default", "gpu", "app")
	require.Error(t, err)
	require.Contains(t, err.Error(), socket)
	require.NotErrorIs(t, err, podresources.ErrPodNotFound)

	s, err := podresourcestest.Start(socket)
	require.NoError(t, err)
	defer s.Stop()
	s.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {"r/x": {"a"}}})
	require.Eventually(t, func() bool {
		got, err := c.ContainerDevices(context.Background(), "default", "gpu", "app")
		return err == nil && len(got["r/x"]) == 1
	}, 10*time.Second, 20*time.Millisecond)

	// A kubelet restart: the same client reconnects to the new server.
	s.Stop()
	s2, err := podresourcestest.Start(socket)
	require.NoError(t, err)
	defer s2.Stop()
	s2.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {"r/x": {"b"}}})
	require.Eventually(t, func() bool {
		got, err := c.ContainerDevices(context.Background(), "default", "gpu", "app")
		return err == nil && len(got["r/x"]) == 1 && got["r/x"][0] == "b"
	}, 10*time.Second, 20*time.Millisecond)
}

func TestNewRejectsBadInput(t *testing.T) {
	_, err := podresources.New("")
	require.Error(t, err)
	_, err = podresources.New("/x.sock", podresources.WithTimeout(0))
	require.ErrorContains(t, err, "timeout")
}

func BenchmarkContainerDevices(b *testing.B) {
	benchQuery(b, func(ctx context.Context, c *podresources.Client) error {
		_, err := c.ContainerDevices(ctx, "default", "gpu", "app")
		return err
	})
}

// benchQuery times query against a fake kubelet over its unix socket,
// after one untimed query that connects.
func benchQuery(b *testing.B, query func(context.Context, *podresources.Client) error) {
	s := startFake(b)
	c := newClient(b, s.Socket())
	ctx := context.Background()
	require.NoError(b, query(ctx, c))
	for b.Loop() {
		if err := query(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRateLimitedCallIsRetried(t *testing.T) {
	s := startFake(t)
	s.SetRateLimited(3)
	c := newClient(t, s.Socket(), podresources.WithTimeout(2*time.Second))
	got, err := c.ContainerDevices(context.Background(), "default", "gpu", "app")
	require.NoError(t, err)
	require.Equal(t, []string{"0000:00:02.0"}, got["dri-cdi.dev/i915"])
	gets, _ := s.Calls()
	require.Equal(t, int64(4), gets, "three rejected calls, then one answered")
}

func TestRateLimitedUntilDeadline(t *testing.T) {
	s := startFake(t)
	s.SetRateLimited(1 << 30)
	c := newClient(t, s.Socket(), podresources.WithTimeout(100*time.Millisecond))
	_, err := c.ContainerDevices(context.Background(), "default", "gpu", "app")
	require.ErrorContains(t, err, "rate-limited by the kubelet until the deadline")
	require.ErrorContains(t, err, "ResourceExhausted")
}

// A deadline that ends during the call after a rate-limit rejection still
// says the kubelet rate-limited the query.
func TestRateLimitedThenDeadlineInCall(t *testing.T) {
	s := startFake(t)
	s.SetRateLimited(2)
	s.SetDelay(time.Second)
	c := newClient(t, s.Socket(), podresources.WithTimeout(100*time.Millisecond))
	_, err := c.ContainerDevices(context.Background(), "default", "gpu", "app")
	require.ErrorContains(t, err, "rate-limited by the kubelet until the deadline")
	require.ErrorContains(t, err, "ResourceExhausted")
	require.ErrorContains(t, err, "DeadlineExceeded")
	require.NotErrorIs(t, err, podresources.ErrPodNotFound)
}
