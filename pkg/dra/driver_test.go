package dra

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/dra/dratest"
	"github.com/dri-cdi/dri-cdi/pkg/dracheckpoint"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/logging/loggingtest"
)

const node = "node-a"

// pools are two i915 cards and an amdgpu card, as config.Assign makes them.
func testPools() []config.Pool {
	card := func(id, driver string, minor uint32) drm.Card {
		return drm.Card{ID: id, Driver: driver, Bus: "pci", PCIAddress: id, NUMANode: -1,
			CardNode:   drm.DeviceNode{Path: "/dev/dri/card0", Minor: minor},
			RenderNode: &drm.DeviceNode{Path: "/dev/dri/renderD128", Minor: 128 + minor}}
	}
	return config.Default().Assign([]drm.Card{
		card("0000:00:02.0", "i915", 0), card("0000:01:00.0", "i915", 1), card("0000:03:00.0", "amdgpu", 2),
	})
}

type env struct {
	t        *testing.T
	data     string
	reg      string
	client   *fake.Clientset
	d        *Driver
	plugin   *dratest.Plugin
	sock     string
	stop     context.CancelFunc
	runErr   chan error
	released bool
}

func fakeClient() *fake.Clientset {
	c := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "node-uid"}})
	generateNames(c)
	return c
}

// generateNames makes the fake client name a created object from its
// GenerateName, as the API server does (the fake stores it nameless),
// and version each slice it writes.
func generateNames(c *fake.Clientset) {
	var n, rv atomic.Int64
	c.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(k8stesting.CreateAction).GetObject().(metav1.Object); ok && o.GetName() == "" && o.GetGenerateName() != "" {
			o.SetName(fmt.Sprintf("%sgen%d", o.GetGenerateName(), n.Add(1)))
		}
		return false, nil, nil
	})
	// Every write of a slice gets a new resourceVersion, as the API
	// server gives it (the fake keeps what it is given).
	for _, verb := range []string{"create", "update"} {
		c.PrependReactor(verb, "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if o, ok := a.(interface{ GetObject() runtime.Object }).GetObject().(metav1.Object); ok {
				o.SetResourceVersion(fmt.Sprint(rv.Add(1)))
			}
			return false, nil, nil
		})
	}
}

// start runs a Driver on data and reg with pools published, registers it
// with the fake kubelet, and stops it at the end of the test.
func start(t *testing.T, data, reg string, client *fake.Clientset, podUID string, pools []config.Pool, unhealthy map[string]bool, skip ...string) *env {
	t.Helper()
	d, err := NewDriver(Options{NodeName: node, Kind: cdi.DefaultKind, SysfsRoot: t.TempDir(),
		PluginDataDir: data, RegistrarDir: reg, PodUID: podUID, API: apiOf(client), Log: testEntry(t)})
	require.NoError(t, err)
	require.NoError(t, d.Update(pools, unhealthy))
	require.ErrorContains(t, d.Ready(), "not started")
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{t: t, data: data, reg: reg, client: client, d: d, stop: cancel, runErr: make(chan error, 1)}
	go func() { e.runErr <- d.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	e.sock, err = dratest.WaitSocket(wctx, reg, skip...)
	require.NoError(t, err)
	e.plugin, err = dratest.Register(wctx, e.sock, "")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return d.Ready() == nil }, 30*time.Second, time.Millisecond)
	t.Cleanup(e.close)
	return e
}

func (e *env) close() {
	if e.released {
		return
	}
	e.released = true
	e.plugin.Close()
	e.stop()
	require.NoError(e.t, <-e.runErr)
}

func testEntry(t *testing.T) *logrus.Entry {
	return loggingtest.New(t, logrus.DebugLevel)
}

// claim creates an allocated claim in the fake API server.
func (e *env) claim(name string, uid types.UID, results ...draapi.DeviceRequestAllocationResult) *drapb.Claim {
	e.t.Helper()
	c := &draapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid},
		Status:     draapi.ResourceClaimStatus{Allocation: &draapi.AllocationResult{Devices: draapi.DeviceAllocationResult{Results: results}}},
	}
	_, err := e.client.ResourceV1().ResourceClaims("ns").Create(context.Background(), k8sClaim(c), metav1.CreateOptions{})
	require.NoError(e.t, err)
	return dratest.Claim("ns", name, string(uid))
}

func result(request, device string) draapi.DeviceRequestAllocationResult {
	return draapi.DeviceRequestAllocationResult{Request: request, Driver: DriverName, Pool: node, Device: device}
}

func (e *env) prepare(claims ...*drapb.Claim) map[string]*drapb.NodePrepareResourceResponse {
	e.t.Helper()
	resp, err := e.plugin.Prepare(context.Background(), claims...)
	require.NoError(e.t, err)
	return resp.Claims
}

// unprepare unprepares claims and requires that each one succeeded.
func (e *env) unprepare(claims ...*drapb.Claim) {
	e.t.Helper()
	resp, err := e.plugin.Unprepare(context.Background(), claims...)
	require.NoError(e.t, err)
	for _, c := range claims {
		require.Contains(e.t, resp.Claims, c.Uid)
		require.Empty(e.t, resp.Claims[c.Uid].Error, c.Uid)
	}
}

// preparedUIDs is the UIDs of the claims in the checkpoint.
func (e *env) preparedUIDs() []string {
	e.t.Helper()
	prepared, err := e.d.Prepared()
	require.NoError(e.t, err)
	return slices.Sorted(maps.Keys(prepared))
}

func cdiIDs(r *drapb.NodePrepareResourceResponse) []string {
	var out []string
	for _, d := range r.Devices {
		out = append(out, d.CdiDeviceIds...)
	}
	return out
}

// The plugin publishes the node's one pool, named after the node, with
// every card.
func TestPublishesOneSliceForTheNode(t *testing.T) {
	e := start(t, kubelettest.ShortDir(t), kubelettest.ShortDir(t), fakeClient(), "", testPools(), map[string]bool{"0000:03:00.0": true})
	var slice draapi.ResourceSlice
	require.Eventually(t, func() bool {
		l, err := listSlices(e.client)
		if err != nil || len(l) != 1 {
			return false
		}
		slice = l[0]
		return true
	}, 30*time.Second, time.Millisecond)
	require.Equal(t, DriverName, slice.Spec.Driver)
	require.Equal(t, node, slice.Spec.Pool.Name)
	require.Equal(t, node, *slice.Spec.NodeName)
	var names []string
	for _, d := range slice.Spec.Devices {
		names = append(names, d.Name)
		if d.Name == "pci-0000-03-00-0" {
			require.Len(t, d.Taints, 1)
			require.Equal(t, UnavailableTaint, d.Taints[0].Key)
		}
	}
	require.ElementsMatch(t, []string{"pci-0000-00-02-0", "pci-0000-01-00-0", "pci-0000-03-00-0"}, names)

	// A hotplugged card shows in the slice.
	pools := testPools()
	pools[0].Cards = append(pools[0].Cards, drm.Card{ID: "0000:05:00.0", Driver: "amdgpu", Bus: "pci", NUMANode: -1})
	require.NoError(t, e.d.Update(pools, nil))
	require.Eventually(t, func() bool {
		l, err := listSlices(e.client)
		return err == nil && len(l) == 1 && len(l[0].Spec.Devices) == 4
	}, 30*time.Second, time.Millisecond)
}

func TestPrepareReturnsTheCardsCDINames(t *testing.T) {
	e := start(t, kubelettest.ShortDir(t), kubelettest.ShortDir(t), fakeClient(), "", testPools(), nil)
	one := e.claim("one", "uid-1", result("gpu", "pci-0000-01-00-0"))
	// b's device came from a prioritized list's subrequest: the kubelet
	// gets the request's own name.
	two := e.claim("two", "uid-2", result("a", "pci-0000-00-02-0"), result("b/integrated", "pci-0000-03-00-0"))
	got := e.prepare(one, two)
	require.Len(t, got, 2)
	require.Empty(t, got["uid-1"].Error)
	require.Equal(t, []string{"dri-cdi.dev/gpu=0000:01:00.0"}, cdiIDs(got["uid-1"]))
	require.Equal(t, "pci-0000-01-00-0", got["uid-1"].Devices[0].DeviceName)
	require.Equal(t, node, got["uid-1"].Devices[0].PoolName)
	require.Equal(t, []string{"gpu"}, got["uid-1"].Devices[0].RequestNames)
	require.Empty(t, got["uid-2"].Error)
	require.Equal(t, []string{"dri-cdi.dev/gpu=0000:00:02.0", "dri-cdi.dev/gpu=0000:03:00.0"}, cdiIDs(got["uid-2"]))
	require.Equal(t, []string{"b"}, got["uid-2"].Devices[1].RequestNames)

	// Idempotent: a second pod of a shared claim, or a kubelet retry, gets
	// the same card.
	again := e.prepare(one)
	require.Equal(t, cdiIDs(got["uid-1"]), cdiIDs(again["uid-1"]))

	// Unprepare releases; the card is then free for another claim.
	e.unprepare(one)
	three := e.claim("three", "uid-3", result("gpu", "pci-0000-01-00-0"))
	require.Empty(t, e.prepare(three)["uid-3"].Error)
	// Unprepare of a claim that is not prepared is no error.
	e.unprepare(one, dratest.Claim("ns", "never", "uid-never"))
	require.ElementsMatch(t, []string{"uid-2", "uid-3"}, e.preparedUIDs())
}

func TestPrepareRefusesBadClaims(t *testing.T) {
	pools := testPools()
	e := start(t, kubelettest.ShortDir(t), kubelettest.ShortDir(t), fakeClient(), "", pools, map[string]bool{"0000:03:00.0": true})
	require.Empty(t, e.prepare(e.claim("holder", "uid-h", result("gpu", "pci-0000-00-02-0")))["uid-h"].Error)

	other := result("gpu", "pci-0000-01-00-0")
	other.Pool = "node-b"
	otherDriver := result("gpu", "pci-0000-01-00-0")
	otherDriver.Driver = "gpu.example.com"
	opaque := e.claim("opaque", "uid-opaque", result("gpu", "pci-0000-01-00-0"))
	c, err := apiOf(e.client).GetClaim(context.Background(), "ns", "opaque")
	require.NoError(t, err)
	c.Status.Allocation.Devices.Config = []draapi.DeviceAllocationConfiguration{{Source: "FromClass",
		DeviceConfiguration: draapi.DeviceConfiguration{Opaque: &draapi.OpaqueDeviceConfiguration{Driver: DriverName, Parameters: []byte(`{}`)}}}}
	_, err = e.client.ResourceV1().ResourceClaims("ns").Update(context.Background(), k8sClaim(c), metav1.UpdateOptions{})
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		claim *drapb.Claim
		want  string
	}{
		"unknown device": {e.claim("unknown", "uid-unknown", result("gpu", "pci-0000-09-00-0")),
			`claim ns/unknown (uid-unknown): device "pci-0000-09-00-0": device is not published on this node (the card left, or never was here)`},
		"other node's pool": {e.claim("pool", "uid-pool", other),
			`claim ns/pool (uid-pool): device "pci-0000-01-00-0": device is in another node's pool "node-b", this node is "node-a"`},
		"no device of ours": {e.claim("foreign", "uid-foreign", otherDriver),
			`claim ns/foreign (uid-foreign): claim has no device of this driver`},
		"unhealthy card": {e.claim("sick", "uid-sick", result("gpu", "pci-0000-03-00-0")),
			`claim ns/sick (uid-sick): device "pci-0000-03-00-0" (card 0000:03:00.0): card unavailable: ` + UnavailableReason},
		"card of another claim": {e.claim("thief", "uid-thief", result("gpu", "pci-0000-00-02-0")),
			`claim ns/thief (uid-thief): device "pci-0000-00-02-0" (card 0000:00:02.0): card is prepared for another claim ns/holder (uid-h)`},
		"same device twice": {e.claim("twice", "uid-twice", result("a", "pci-0000-01-00-0"), result("b", "pci-0000-01-00-0")),
			`claim ns/twice (uid-twice): malformed allocation: device "pci-0000-01-00-0" allocated twice`},
		"empty device name": {e.claim("empty", "uid-empty", result("gpu", "")),
			`claim ns/empty (uid-empty): malformed allocation: result without request or device name (request "gpu", device "")`},
		"opaque config": {opaque,
			`claim ns/opaque (uid-opaque): opaque device configuration is not supported (config for requests [])`},
	} {
		t.Run(name, func(t *testing.T) {
			got := e.prepare(tc.claim)
			require.Len(t, got, 1)
			require.Equal(t, tc.want, got[tc.claim.Uid].Error)
			require.Empty(t, got[tc.claim.Uid].Devices)
		})
	}
	// None of them was recorded; the holder's claim is intact.
	require.Equal(t, []string{"uid-h"}, e.preparedUIDs())

	// A bad claim in a batch fails alone.
	ok := e.claim("ok", "uid-ok", result("gpu", "pci-0000-01-00-0"))
	got := e.prepare(ok, dratest.Claim("ns", "unknown", "uid-unknown"))
	require.Empty(t, got["uid-ok"].Error)
	require.Equal(t, []string{"dri-cdi.dev/gpu=0000:01:00.0"}, cdiIDs(got["uid-ok"]))
	require.NotEmpty(t, got["uid-unknown"].Error)

	// A claim the API server does not know, or whose UID changed, gets
	// its own error, naming it; nothing is prepared for it, and the other
	// claims of the call are.
	before := e.preparedUIDs()
	got = e.prepare(dratest.Claim("ns", "ok", "uid-replaced"), dratest.Claim("ns", "missing", "uid-missing"))
	require.Contains(t, got["uid-replaced"].Error, "claim ns/ok: the kubelet asked for UID uid-replaced, the API server has uid-ok (the claim was replaced)")
	require.Contains(t, got["uid-missing"].Error, "claim ns/missing: read it from the API server:")
	require.Contains(t, got["uid-missing"].Error, "not found")
	require.Equal(t, before, e.preparedUIDs())
}

// Prepared claims survive a restart: a repeated prepare gets the same
// card, unprepare works, and a card that left meanwhile still unprepares.
func TestCheckpointSurvivesRestart(t *testing.T) {
	data, reg, client := kubelettest.ShortDir(t), kubelettest.ShortDir(t), fakeClient()
	e := start(t, data, reg, client, "", testPools(), nil)
	one := e.claim("one", "uid-1", result("gpu", "pci-0000-01-00-0"))
	two := e.claim("two", "uid-2", result("gpu", "pci-0000-03-00-0"))
	first := e.prepare(one, two)
	require.Empty(t, first["uid-1"].Error)
	e.close()

	// The amdgpu card is gone after the restart.
	pools := testPools()
	pools = pools[1:] // amdgpu is the first default pool, sorted by resource
	require.Equal(t, "dri-cdi.dev/i915", pools[0].Resource)
	e2 := start(t, data, reg, client, "", pools, nil)
	again := e2.prepare(one)
	require.Equal(t, cdiIDs(first["uid-1"]), cdiIDs(again["uid-1"]))
	e2.unprepare(one, two)
	require.Empty(t, e2.preparedUIDs())
}

// A corrupt checkpoint fails the calls with an error naming the file;
// it is never taken for an empty one.
func TestCorruptCheckpointIsAnError(t *testing.T) {
	data := kubelettest.ShortDir(t)
	e := start(t, data, kubelettest.ShortDir(t), fakeClient(), "", testPools(), nil)
	one := e.claim("one", "uid-1", result("gpu", "pci-0000-01-00-0"))
	require.Empty(t, e.prepare(one)["uid-1"].Error)
	path := filepath.Join(data, CheckpointFile)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(string(b[:len(b)-70])+`"}`), 0o600))
	_, err = e.plugin.Unprepare(context.Background(), one)
	require.ErrorContains(t, err, "checkpoint")
	require.ErrorContains(t, err, path)
	_, err = e.plugin.Prepare(context.Background(), one)
	require.ErrorContains(t, err, path)

	// An edit that keeps the JSON valid fails the checksum.
	edited := strings.Replace(string(b), "0000:01:00.0", "0000:00:02.0", -1)
	require.NotEqual(t, string(b), edited)
	require.NoError(t, os.WriteFile(path, []byte(edited), 0o600))
	_, err = e.plugin.Prepare(context.Background(), one)
	require.ErrorContains(t, err, "checkpoint "+strconv.Quote(path)+" is corrupt: checksum mismatch")
}

// With rolling updates two instances run at once on one data dir, each
// with its own registration socket; a claim prepared through one is
// unprepared through the other.
func TestRollingUpdateSharesState(t *testing.T) {
	data, reg, client := kubelettest.ShortDir(t), kubelettest.ShortDir(t), fakeClient()
	old := start(t, data, reg, client, "pod-old", testPools(), nil)
	neu := start(t, data, reg, client, "pod-new", testPools(), nil, old.sock)
	require.NotEqual(t, old.sock, neu.sock)
	require.NotEqual(t, old.plugin.Info.Endpoint, neu.plugin.Info.Endpoint)
	one := old.claim("one", "uid-1", result("gpu", "pci-0000-01-00-0"))
	require.Empty(t, old.prepare(one)["uid-1"].Error)
	// The new instance knows the claim: same card again, and refuses the
	// card to another claim.
	require.Equal(t, []string{"dri-cdi.dev/gpu=0000:01:00.0"}, cdiIDs(neu.prepare(one)["uid-1"]))
	thief := neu.claim("thief", "uid-t", result("gpu", "pci-0000-01-00-0"))
	require.Contains(t, neu.prepare(thief)["uid-t"].Error, "prepared for another claim ns/one")
	old.close()
	_, err := os.Stat(old.sock)
	require.ErrorIs(t, err, os.ErrNotExist, "the old instance left its socket")
	neu.unprepare(one)
	require.Empty(t, neu.preparedUIDs())
}

// A kubelet that refuses the registration leaves the plugin unready with
// the kubelet's reason.
func TestRefusedRegistrationIsNotReady(t *testing.T) {
	reg := kubelettest.ShortDir(t)
	d, err := NewDriver(Options{NodeName: node, Kind: cdi.DefaultKind, PluginDataDir: kubelettest.ShortDir(t), RegistrarDir: reg,
		API: apiOf(fakeClient()), Log: loggingtest.New(t, logrus.InfoLevel)})
	require.NoError(t, err)
	require.NoError(t, d.Update(testPools(), nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	sock, err := dratest.WaitSocket(ctx, reg)
	require.NoError(t, err)
	_, err = dratest.Register(ctx, sock, "version skew")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		err := d.Ready()
		return err != nil && err.Error() == "kubelet refused the registration: version skew"
	}, 30*time.Second, time.Millisecond)
}

func TestNewDriverChecksOptions(t *testing.T) {
	log := logrus.NewEntry(logrus.New())
	_, err := NewDriver(Options{Kind: cdi.DefaultKind, API: apiOf(fakeClient()), Log: log})
	require.ErrorContains(t, err, "node name is empty")
	_, err = NewDriver(Options{NodeName: node, Kind: cdi.DefaultKind, Log: log})
	require.ErrorContains(t, err, "no Kubernetes client")

	// The directories default to the kubelet's, here only
	// (Run passes the flags' values on as they are).
	d, err := NewDriver(Options{NodeName: node, Kind: cdi.DefaultKind, API: apiOf(fakeClient()), Log: log})
	require.NoError(t, err)
	require.Equal(t, DefaultPluginDataDir, d.opts.PluginDataDir)
	// dri-cdi-nri reads the checkpoint there by default.
	require.Equal(t, dracheckpoint.DefaultPath, filepath.Join(DefaultPluginDataDir, CheckpointFile))
	require.Equal(t, DefaultRegistrarDir, d.HostDirs()[0].Path)
}
