package podresources

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/dri-cdi/dri-cdi/pkg/backoff"
)

const (
	// DefaultSocket is where the kubelet serves the PodResources API.
	DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"
	// DefaultTimeout bounds one ContainerAllocation or ContainerDevices
	// call, Get and List fallback and rate-limit retries together: about
	// 60 times the slowest answer measured from a loaded kubelet
	// (4.3 ms), room for the stalls of a loaded node (100 ms was missed
	// once in a bench run), six retries while the kubelet's rate limiter
	// refills a token every 10 ms, and an eighth of containerd's 2 s NRI
	// timeout (docs/nri.md, "The PodResources deadline").
	DefaultTimeout = 250 * time.Millisecond
	// maxMsgSize allows List answers of large nodes.
	maxMsgSize = 16 << 20
)

var (
	// ErrPodNotFound means the kubelet does not know the pod.
	ErrPodNotFound = errors.New("pod not known to the kubelet")
	// ErrContainerNotFound means the kubelet knows the pod but reports no
	// container of that name in it.
	ErrContainerNotFound = errors.New("container not known to the kubelet")
)

// Option configures a Client.
type Option func(*Client)

// WithTimeout bounds each ContainerAllocation or ContainerDevices call
// (default DefaultTimeout).
// The caller's context deadline still applies when it is earlier.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout = d }
}

// Client asks the kubelet which devices it allocated to a container. It is
// safe for concurrent use.
type Client struct {
	socket  string
	timeout time.Duration
	conn    *grpc.ClientConn
	api     v1.PodResourcesListerClient
	// noGet is set once the kubelet has answered that Get is not
	// available; List is used from then on.
	noGet atomic.Bool
}

// New returns a client of the PodResources socket at path. It does not
// connect: the connection is made on the first call and kept open.
func New(socket string, opts ...Option) (*Client, error) {
	if socket == "" {
		return nil, errors.New("empty PodResources socket path")
	}
	c := &Client{socket: socket, timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	if c.timeout <= 0 {
		return nil, fmt.Errorf("invalid PodResources timeout %v: must be positive", c.timeout)
	}
	conn, err := grpc.NewClient("unix:"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize)),
		// The kubelet restarts in seconds; do not let gRPC's default
		// backoff (up to two minutes) keep us disconnected after that.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: grpcbackoff.Config{
				BaseDelay:  50 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   time.Second,
			},
			MinConnectTimeout: time.Second,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("failed to set up PodResources client for %s: %w", socket, err)
	}
	c.conn = conn
	c.api = v1.NewPodResourcesListerClient(conn)
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	return c.conn.Close()
}

// Socket returns the socket path the client talks to.
func (c *Client) Socket() string { return c.socket }

// ContainerDevices returns the device IDs the kubelet allocated to one
// container, by resource name. A pod the kubelet does not know gives an
// error wrapping ErrPodNotFound, a container it does not list in that pod
// one wrapping ErrContainerNotFound. Any other error means the kubelet
// could not be asked in time.
func (c *Client) ContainerDevices(ctx context.Context, namespace, pod, container string) (map[string][]string, error) {
	res, err := c.podResources(ctx, namespace, pod)
	if err != nil {
		return nil, err
	}
	return containerDevices(res, namespace, pod, container)
}

// podResources asks the kubelet about one pod, within the client's
// timeout.
func (c *Client) podResources(ctx context.Context, namespace, pod string) (*v1.PodResources, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	var (
		res *v1.PodResources
		err error
	)
	// The kubelet rate-limits this API (a burst of 10, then about 100
	// queries a second) and answers the excess with ResourceExhausted.
	// A burst of GPU containers on one node must not fail on that, so a
	// rate-limited call is retried with a short backoff until the deadline.
	// limited is the last rate-limit rejection, so that a deadline that
	// ends during the next call still says why the calls took so long.
	var limited error
	wait := retryBackoff()
	for {
		if !c.noGet.Load() {
			res, err = c.get(ctx, namespace, pod)
			if err != nil && getUnavailable(err) {
				c.noGet.Store(true)
				res, err = c.list(ctx, namespace, pod)
			}
		} else {
			res, err = c.list(ctx, namespace, pod)
		}
		if status.Code(err) != codes.ResourceExhausted {
			break
		}
		limited = err
		if wait.Sleep(ctx) != nil {
			return nil, fmt.Errorf("%w (rate-limited by the kubelet until the deadline)", err)
		}
	}
	if c := status.Code(err); err != nil && limited != nil && (c == codes.DeadlineExceeded || c == codes.Canceled) {
		return nil, fmt.Errorf("%w (rate-limited by the kubelet until the deadline; the last call ended with: %v)", limited, err)
	}
	return res, err
}

// Backoff between calls the kubelet rejected by its rate limit.
const (
	retryStart = 5 * time.Millisecond
	retryMax   = 50 * time.Millisecond
)

// retryBackoff is the wait between calls the kubelet rejected by its rate
// limit: 5, 10, 20, 40 ms, then 50 ms until the deadline.
func retryBackoff() backoff.Backoff { return backoff.New(retryStart, retryMax) }

func (c *Client) get(ctx context.Context, namespace, pod string) (*v1.PodResources, error) {
	rsp, err := c.api.Get(ctx, &v1.GetPodResourcesRequest{PodName: pod, PodNamespace: namespace})
	if err != nil {
		if podNotFound(err) {
			return nil, fmt.Errorf("kubelet PodResources Get %s/%s: %w", namespace, pod, ErrPodNotFound)
		}
		return nil, c.callError("Get", namespace, pod, err)
	}
	if rsp.GetPodResources() == nil {
		return nil, fmt.Errorf("kubelet PodResources Get %s/%s: %w: empty answer", namespace, pod, ErrPodNotFound)
	}
	return rsp.GetPodResources(), nil
}

func (c *Client) list(ctx context.Context, namespace, pod string) (*v1.PodResources, error) {
	rsp, err := c.api.List(ctx, &v1.ListPodResourcesRequest{})
	if err != nil {
		return nil, c.callError("List", namespace, pod, err)
	}
	for _, p := range rsp.GetPodResources() {
		if p.GetNamespace() == namespace && p.GetName() == pod {
			return p, nil
		}
	}
	return nil, fmt.Errorf("kubelet PodResources List: pod %s/%s: %w", namespace, pod, ErrPodNotFound)
}

// callError wraps a failed call about one pod (callFailed).
func (c *Client) callError(method, namespace, pod string, err error) error {
	return c.callFailed(fmt.Sprintf("%s for pod %s/%s", method, namespace, pod), err)
}

// callFailed wraps a failed call, named by call. After a connection
// failure it asks gRPC to reconnect right away, so the next container
// does not wait out a backoff that began while the kubelet was
// restarting.
func (c *Client) callFailed(call string, err error) error {
	if status.Code(err) == codes.Unavailable {
		c.conn.ResetConnectBackoff()
	}
	return fmt.Errorf("kubelet PodResources %s via %s: %w", call, c.socket, err)
}

func containerDevices(res *v1.PodResources, namespace, pod, container string) (map[string][]string, error) {
	for _, ctr := range res.GetContainers() {
		if ctr.GetName() != container {
			continue
		}
		out := map[string][]string{}
		for _, d := range ctr.GetDevices() {
			if len(d.GetDeviceIds()) == 0 {
				continue
			}
			out[d.GetResourceName()] = append(out[d.GetResourceName()], d.GetDeviceIds()...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("kubelet PodResources: container %q of pod %s/%s: %w", container, namespace, pod, ErrContainerNotFound)
}

// getUnavailable reports whether the kubelet cannot serve Get: an old
// kubelet without the method, or the KubeletPodResourcesGet feature gate
// off (answered as a plain error by the kubelet).
func getUnavailable(err error) bool {
	return kubeletStatus(err, codes.Unimplemented, func(m string) bool {
		return strings.Contains(m, "Get method disabled")
	})
}

// podNotFound reports whether Get answered that the pod is unknown:
// NotFound, or the kubelet's plain "pod X in namespace Y not found".
func podNotFound(err error) bool {
	return kubeletStatus(err, codes.NotFound, func(m string) bool {
		return strings.HasPrefix(m, "pod ") && strings.HasSuffix(m, " not found")
	})
}

// kubeletStatus reports whether err is a gRPC status of code, or a plain
// error of the kubelet's (codes.Unknown) whose message plain accepts:
// the kubelet answers some conditions with a status code and others,
// depending on its version, only with a message.
func kubeletStatus(err error, code codes.Code, plain func(msg string) bool) bool {
	s, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch s.Code() {
	case code:
		return true
	case codes.Unknown:
		return plain(s.Message())
	}
	return false
}
