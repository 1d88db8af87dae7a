package nri_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/podresources/podresourcestest"
)

// requireCreated checks a CreateContainer outcome: with wantErr, an
// error saying each of them (and false: the case is done); without, no
// error and exactly the nodes want in the spec.
func requireCreated(t *testing.T, spec *rspec.Spec, err error, wantErr []string, want []node) bool {
	t.Helper()
	if wantErr != nil {
		require.Error(t, err)
		for _, s := range wantErr {
			require.ErrorContains(t, err, s)
		}
		return false
	}
	require.NoError(t, err)
	require.Equal(t, want, nodesOf(spec))
	return true
}

// node is a device node expected in the adjusted spec.
type node struct {
	path         string
	major, minor int64
	uid, gid     uint32
}

func nodesOf(s *rspec.Spec) []node {
	var out []node
	for _, d := range s.Linux.Devices {
		n := node{path: d.Path, major: d.Major, minor: d.Minor}
		if d.UID != nil {
			n.uid = *d.UID
		}
		if d.GID != nil {
			n.gid = *d.GID
		}
		out = append(out, n)
	}
	return out
}

// allowRules counts the allow rules for char device major:minor.
func allowRules(s *rspec.Spec, major, minor int64) int {
	n := 0
	for _, r := range s.Linux.Resources.Devices {
		if r.Allow && r.Type == "c" && r.Major != nil && *r.Major == major && r.Minor != nil && *r.Minor == minor &&
			strings.Contains(r.Access, "r") && strings.Contains(r.Access, "w") {
			n++
		}
	}
	return n
}

func TestCreateContainer(t *testing.T) {
	r := newRig(t)
	r.start()

	cardANodes := []node{
		{"/dev/dri/card1", 226, 1, 0, videoGID},
		{"/dev/dri/renderD128", 226, 128, 0, renderGID},
	}
	tests := map[string]struct {
		pod       string
		ctr       *api.Container
		allocated map[string]podresourcestest.Container // kubelet's view of the pod
		want      []node                                // devices in the adjusted spec
		wantRules [][2]int64                            // exactly one allow rule each
		wantErr   []string                              // substrings of the error
		wantLog   string                                // substring of a warning
		metric    string                                // counter that must have grown by one
	}{
		"no request, no adjustment": {
			pod:    "plain",
			ctr:    container("app"),
			metric: "dri_cdi_nri_containers_total",
		},
		"allocated (nri delivery): nodes and cgroup rules": {
			pod:       "gpu",
			ctr:       container("app", asks(resI915, cardA)),
			allocated: map[string]podresourcestest.Container{"app": {resI915: {cardA}}},
			want:      cardANodes,
			wantRules: [][2]int64{{226, 1}, {226, 128}},
			metric:    "dri_cdi_nri_containers_injected_total",
		},
		"already injected by the runtime's CDI: nothing duplicated": {
			pod:       "cdi",
			ctr:       container("app", asks(resI915, cardA), cdiNames(cardA), cdiInjected(cardA)),
			allocated: map[string]podresourcestest.Container{"app": {resI915: {cardA}}},
			want:      []node{{"/dev/dri/card1", 226, 1, 0, 0}, {"/dev/dri/renderD128", 226, 128, 0, 0}},
			wantRules: [][2]int64{{226, 1}, {226, 128}},
		},
		"forged annotation, nothing allocated: nothing injected": {
			pod:       "forged",
			ctr:       container("app", asks(resI915, cardA)),
			allocated: map[string]podresourcestest.Container{"app": {}},
			wantLog:   resI915 + "=" + cardA,
			metric:    "dri_cdi_nri_containers_denied_total",
		},
		"forged annotation, pod unknown to the kubelet: nothing injected": {
			pod:     "not-a-kubelet-pod",
			ctr:     container("app", asks(resI915, cardA)),
			wantLog: resI915 + "=" + cardA,
			metric:  "dri_cdi_nri_containers_denied_total",
		},
		"annotation names another container's card": {
			pod: "two",
			ctr: container("app", asks(resI915, cardA, cardB)),
			allocated: map[string]podresourcestest.Container{
				"app":   {resI915: {cardA}},
				"other": {resI915: {cardB}},
			},
			want:      cardANodes,
			wantRules: [][2]int64{{226, 1}, {226, 128}},
			wantLog:   resI915 + "=" + cardB,
		},
		"replica IDs of one card": {
			pod:       "replicas",
			ctr:       container("app", asks(resI915, alloc.ReplicaID(cardA, 0), alloc.ReplicaID(cardA, 1))),
			allocated: map[string]podresourcestest.Container{"app": {resI915: {alloc.ReplicaID(cardA, 1), alloc.ReplicaID(cardA, 0)}}},
			want:      cardANodes,
			wantRules: [][2]int64{{226, 1}, {226, 128}},
		},
		"partly injected by the runtime's CDI: the rest added": {
			pod: "cdi-partial",
			ctr: container("app", asks(resI915, cardA), cdiNames(cardA), func(c *api.Container) {
				c.Linux = &api.LinuxContainer{Devices: []*api.LinuxDevice{{Path: "/dev/dri/card1", Type: "c", Major: 226, Minor: 1}}}
			}),
			allocated: map[string]podresourcestest.Container{"app": {resI915: {cardA}}},
			want:      []node{{"/dev/dri/card1", 226, 1, 0, 0}, {"/dev/dri/renderD128", 226, 128, 0, renderGID}},
			wantRules: [][2]int64{{226, 1}, {226, 128}},
		},
		"non-root user owns the nodes": {
			pod:       "nonroot",
			ctr:       container("app", asks(resI915, cardA), user(1000, 1000)),
			allocated: map[string]podresourcestest.Container{"app": {resI915: {cardA}}},
			want:      []node{{"/dev/dri/card1", 226, 1, 1000, 44}, {"/dev/dri/renderD128", 226, 128, 1000, renderGID}},
			wantRules: [][2]int64{{226, 1}, {226, 128}},
		},
		"CDI device of our kind the kubelet did not allocate: container fails": {
			pod:       "cdi-forged",
			ctr:       container("app", asks(resI915, cardA), cdiNames(cardA, cardB), cdiInjected(cardA, cardB)),
			allocated: map[string]podresourcestest.Container{"app": {resI915: {cardA}}},
			wantErr:   []string{"default/cdi-forged", `"app"`, cardB, "not allocated"},
			metric:    "dri_cdi_nri_errors_total",
		},
		"garbage annotation: clear error": {
			pod:     "garbage",
			ctr:     container("app", annotation(alloc.AnnotationKey(resI915), "%%%")),
			wantErr: []string{"default/garbage", alloc.AnnotationKey(resI915), "not <resource>=<id>"},
		},
		"path traversal in annotation: clear error": {
			pod:     "traversal",
			ctr:     container("app", annotation(alloc.AnnotationKey(resI915), resI915+"=../../../dev/sda")),
			wantErr: []string{"default/traversal", alloc.AnnotationKey(resI915), "invalid character"},
		},
		"allocated card unknown to the specs: clear error": {
			pod:       "unknown-card",
			ctr:       container("app", asks(resI915, "0000:99:00.0")),
			allocated: map[string]podresourcestest.Container{"app": {resI915: {"0000:99:00.0"}}},
			wantErr:   []string{"default/unknown-card", "0000:99:00.0", "not described by the CDI specs"},
		},
		"resource dri-cdi does not serve: ignored": {
			pod: "other-resource",
			ctr: container("app", asks("example.com/gpu", cardA)),
		},
		"hostPath /dev/dri without a request: warned, nothing granted": {
			pod:     "hostpath",
			ctr:     container("app", hostPath("/dev/dri")),
			wantLog: "EPERM",
			metric:  "dri_cdi_nri_hostpath_misuse_total",
		},
	}
	reg := r.plugin.Metrics().Registry()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.allocated != nil {
				r.kubelet.SetPod("default", tc.pod, tc.allocated)
			}
			r.logs.Reset()
			before := 0.0
			if tc.metric != "" {
				before = sum(t, reg, tc.metric)
			}
			gets, _ := r.kubelet.Calls()

			spec, err := r.create(pod(tc.pod), tc.ctr)

			if tc.metric != "" {
				require.Equal(t, before+1, sum(t, reg, tc.metric), tc.metric)
			}
			if tc.wantLog != "" {
				require.True(t, logged(r, logrus.WarnLevel, tc.wantLog), "no warning containing %q", tc.wantLog)
			}
			if !requireCreated(t, spec, err, tc.wantErr, tc.want) {
				return
			}
			for _, rule := range tc.wantRules {
				require.Equal(t, 1, allowRules(spec, rule[0], rule[1]), "allow rules for c %d:%d", rule[0], rule[1])
			}
			if len(tc.want) == 0 {
				require.Equal(t, baseSpec(tc.ctr), spec, "spec must be unchanged")
			}
			if len(tc.ctr.GetCDIDevices()) == 0 && len(tc.ctr.GetAnnotations()) == 1 {
				after, _ := r.kubelet.Calls()
				require.Equal(t, gets, after, "a container asking for nothing must not reach the kubelet")
			}
		})
	}
}

func logged(r *rig, level logrus.Level, substr string) bool {
	for _, e := range r.logs.AllEntries() {
		if e.Level != level {
			continue
		}
		if strings.Contains(e.Message, substr) {
			return true
		}
		for _, v := range e.Data {
			if strings.Contains(strings.Join(toStrings(v), " "), substr) {
				return true
			}
		}
	}
	return false
}

func toStrings(v any) []string {
	switch x := v.(type) {
	case []string:
		return x
	case string:
		return []string{x}
	}
	return nil
}

func TestPodResourcesDown(t *testing.T) {
	r := newRig(t, withPodResourcesTimeout(200*time.Millisecond))
	r.start()
	r.kubelet.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {resI915: {cardA}}})
	r.kubelet.Stop()

	_, err := r.create(pod("gpu"), container("app", asks(resI915, cardA)))
	require.Error(t, err)
	require.ErrorContains(t, err, "default/gpu")
	require.ErrorContains(t, err, `"app"`)
	require.ErrorContains(t, err, "cannot confirm")
	require.ErrorContains(t, err, r.kubelet.Socket())

	// Others are not affected.
	spec, err := r.create(pod("plain"), container("app"))
	require.NoError(t, err)
	require.Empty(t, spec.Linux.Devices)
	spec, err = r.create(pod("hostpath"), container("app", hostPath("/dev/dri")))
	require.NoError(t, err)
	require.Empty(t, spec.Linux.Devices)

	// The kubelet comes back: the plugin, still connected, injects again.
	k, err := podresourcestest.Start(r.kubelet.Socket())
	require.NoError(t, err)
	t.Cleanup(k.Stop)
	k.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {resI915: {cardA}}})
	require.Eventually(t, func() bool {
		spec, err := r.create(pod("gpu"), container("app", asks(resI915, cardA)))
		return err == nil && len(spec.Linux.Devices) == 2
	}, waitFor, 20*time.Millisecond)
	require.True(t, r.plugin.Connected())
}

func TestPodResourcesSlow(t *testing.T) {
	r := newRig(t, withPodResourcesTimeout(100*time.Millisecond))
	r.start()
	r.kubelet.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {resI915: {cardA}}})
	r.kubelet.SetDelay(time.Minute)

	_, err := r.create(pod("gpu"), container("app", asks(resI915, cardA)))
	require.Error(t, err)
	require.ErrorContains(t, err, "default/gpu")
	require.ErrorContains(t, err, "DeadlineExceeded")
	reg := r.plugin.Metrics().Registry()
	require.Equal(t, 1.0, metric(t, reg, "dri_cdi_nri_errors_total", "reason", "unconfirmed"))

	spec, err := r.create(pod("plain"), container("app"))
	require.NoError(t, err)
	require.Empty(t, spec.Linux.Devices)

	// The runtime did not drop the plugin for the failure.
	r.kubelet.SetDelay(0)
	spec, err = r.create(pod("gpu"), container("app", asks(resI915, cardA)))
	require.NoError(t, err)
	require.Len(t, spec.Linux.Devices, 2)
}

func TestReconnectAfterRuntimeRestart(t *testing.T) {
	r := newRig(t)
	r.start()
	r.kubelet.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {resI915: {cardA}}})

	for i := range 2 {
		r.stopRuntime()
		require.Eventually(t, func() bool { return !r.plugin.Connected() }, waitFor, tick, "restart %d", i)
		require.Equal(t, 0.0, metric(t, r.plugin.Metrics().Registry(), "dri_cdi_nri_connected"))
		r.startRuntime()
		r.waitRegistered()

		spec, err := r.create(pod("gpu"), container("app", asks(resI915, cardA)))
		require.NoError(t, err)
		require.Len(t, spec.Linux.Devices, 2)
		require.Equal(t, 1, allowRules(spec, 226, 128))
	}
	require.GreaterOrEqual(t, metric(t, r.plugin.Metrics().Registry(), "dri_cdi_nri_reconnects_total"), 2.0)
	require.Equal(t, 1.0, metric(t, r.plugin.Metrics().Registry(), "dri_cdi_nri_connected"))
}

func TestStartsBeforeRuntime(t *testing.T) {
	r := newRig(t)
	r.startPlugin()
	require.Eventually(t, func() bool {
		return metric(t, r.plugin.Metrics().Registry(), "dri_cdi_nri_reconnects_total") >= 2
	}, waitFor, tick)
	r.startRuntime()
	r.waitRegistered()
	_, err := r.create(pod("plain"), container("app"))
	require.NoError(t, err)
}

// TestPreRegistered runs the plugin the way the runtime runs a plugin it
// launched from its plugin directory: with a connected socket, its name
// and index in the environment.
func TestPreRegistered(t *testing.T) {
	r := newRig(t)
	r.startRuntime()
	conn, err := net.Dial("unix", r.nriSock)
	require.NoError(t, err)
	f, err := conn.(*net.UnixConn).File()
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	t.Cleanup(func() { _ = f.Close() })
	t.Setenv(api.PluginSocketEnvVar, strconv.Itoa(int(f.Fd())))
	t.Setenv(api.PluginNameEnvVar, "dri-cdi")
	t.Setenv(api.PluginIdxEnvVar, "10")

	runDone := make(chan error, 1)
	go func() {
		runDone <- r.plugin.Run(context.Background(), nri.ConnectConfig{Socket: "/nonexistent/nri.sock", Index: "99"})
	}()
	r.waitRegistered()
	r.kubelet.SetPod("default", "gpu", map[string]podresourcestest.Container{"app": {resI915: {cardA}}})
	spec, err := r.create(pod("gpu"), container("app", asks(resI915, cardA)))
	require.NoError(t, err)
	require.Len(t, spec.Linux.Devices, 2)

	// The runtime goes away: a pre-registered plugin cannot reconnect and
	// exits; the runtime launches it again.
	r.stopRuntime()
	select {
	case err := <-runDone:
		require.ErrorContains(t, err, "pre-registered")
	case <-time.After(waitFor):
		t.Fatal("pre-registered plugin did not return after its connection closed")
	}
}

func TestRunRejectsBadIdentity(t *testing.T) {
	r := newRig(t)
	err := r.plugin.Run(context.Background(), nri.ConnectConfig{Socket: r.nriSock, Index: "x1"})
	require.ErrorContains(t, err, "index")
	err = r.plugin.Run(context.Background(), nri.ConnectConfig{Socket: r.nriSock, Name: "a b"})
	require.ErrorContains(t, err, "name")
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	r := newRig(t)
	good := nri.Config{Kind: kind, Resources: served{}, Authorizer: r.client, Devices: r.store, Log: logrus.NewEntry(logrus.New())}
	tests := map[string]func(*nri.Config){
		"no kind":       func(c *nri.Config) { c.Kind = "" },
		"bad kind":      func(c *nri.Config) { c.Kind = "gpu" },
		"no filter":     func(c *nri.Config) { c.Resources = nil },
		"no authorizer": func(c *nri.Config) { c.Authorizer = nil },
		"no devices":    func(c *nri.Config) { c.Devices = nil },
		"no logger":     func(c *nri.Config) { c.Log = nil },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			c := good
			mutate(&c)
			_, err := nri.New(c)
			require.Error(t, err)
		})
	}
	_, err := nri.New(good)
	require.NoError(t, err)
}

// TestErrorIsNotATimeout makes sure a failure never reads, on the runtime
// side, as the plugin timing out, which would disconnect it.
func TestErrorIsNotATimeout(t *testing.T) {
	r := newRig(t, withPodResourcesTimeout(50*time.Millisecond))
	r.kubelet.SetDelay(time.Minute)
	_, _, err := r.plugin.CreateContainer(context.Background(), pod("gpu"), container("app", asks(resI915, cardA)))
	require.Error(t, err)
	require.False(t, errors.Is(err, context.DeadlineExceeded))
	require.ErrorContains(t, err, "DeadlineExceeded")
}

func TestHealthAndReadiness(t *testing.T) {
	r := newRig(t)
	require.False(t, r.plugin.Connected())
	require.ErrorContains(t, r.plugin.Ready(r.store)(), "not connected")
	r.start()
	require.True(t, r.plugin.Connected())
	require.NoError(t, r.plugin.Ready(r.store)())
	empty := nri.NewSpecIndex(os.TempDir(), kind, nil, nil, logrus.NewEntry(logrus.New()))
	require.ErrorContains(t, r.plugin.Ready(empty)(), "CDI specs")
}

// TestRuntimeThatNeverAnswers: a socket that accepts but never completes
// the registration must not hold the plugin; once a real runtime listens
// there, the plugin registers.
func TestRuntimeThatNeverAnswers(t *testing.T) {
	r := newRig(t)
	l, err := net.Listen("unix", r.nriSock)
	require.NoError(t, err)
	var held []net.Conn
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() {
		runDone <- r.plugin.Run(ctx, nri.ConnectConfig{
			Socket: r.nriSock, MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
			RegistrationTimeout: 100 * time.Millisecond,
		})
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-runDone)
	})
	require.Eventually(t, func() bool {
		return metric(t, r.plugin.Metrics().Registry(), "dri_cdi_nri_reconnects_total") >= 2
	}, waitFor, tick)

	require.NoError(t, l.Close())
	<-acceptDone
	for _, c := range held {
		_ = c.Close()
	}
	_ = os.Remove(r.nriSock)
	r.startRuntime()
	r.waitRegistered()
	_, err = r.create(pod("plain"), container("app"))
	require.NoError(t, err)
}

// TestRunBacksOff: with no runtime listening, the waits between attempts
// start at MinBackoff and double up to MaxBackoff.
func TestRunBacksOff(t *testing.T) {
	r := newRig(t)
	retries := func() []string {
		var out []string
		for _, e := range r.logs.AllEntries() {
			if d, ok := e.Data["retryIn"].(string); ok {
				out = append(out, d)
			}
		}
		return out
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() {
		runDone <- r.plugin.Run(ctx, nri.ConnectConfig{
			Socket: r.nriSock, MinBackoff: time.Millisecond, MaxBackoff: 8 * time.Millisecond,
		})
	}()
	require.Eventually(t, func() bool { return len(retries()) >= 6 }, waitFor, tick)
	cancel()
	require.NoError(t, <-runDone)
	require.Equal(t, []string{"1ms", "2ms", "4ms", "8ms", "8ms", "8ms"}, retries()[:6])
}
