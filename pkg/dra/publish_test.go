package dra

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
)

func testDevices(n int) []draapi.Device {
	out := make([]draapi.Device, n)
	for i := range out {
		out[i] = draapi.Device{Name: fmt.Sprintf("dev-%03d", i), Attributes: map[draapi.QualifiedName]draapi.DeviceAttribute{
			AttrID: {StringValue: ptr.To(fmt.Sprint(i))}}}
	}
	return out
}

// sliceWrites counts the create, update and delete calls on slices.
func sliceWrites(c interface{ Actions() []k8stesting.Action }) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetResource().Resource == "resourceslices" && a.GetVerb() != "list" && a.GetVerb() != "watch" && a.GetVerb() != "get" {
			n++
		}
	}
	return n
}

// A pool of more cards than a slice holds is split in slices of 128,
// named by index, at one generation; a smaller pool later is written
// back into the first slice at the next generation and the others are
// deleted.
func TestPublisherSplitsThePoolAndShrinksIt(t *testing.T) {
	client := fakeClient()
	p := newSlicePublisher(apiOf(client), node, testEntry(t))
	ctx := context.Background()
	stored, err := p.sync(ctx, testDevices(300))
	require.NoError(t, err)
	require.Len(t, stored, 3)
	l, err := listSlices(client)
	require.NoError(t, err)
	require.Len(t, l, 3)
	sizes := map[string]int{}
	for _, s := range l {
		require.Equal(t, int64(1), s.Spec.Pool.Generation)
		require.Equal(t, int64(3), s.Spec.Pool.ResourceSliceCount)
		require.Equal(t, node, s.OwnerReferences[0].Name)
		require.Equal(t, "node-uid", string(s.OwnerReferences[0].UID))
		sizes[s.Name[:5]] = len(s.Spec.Devices)
	}
	require.Equal(t, map[string]int{"00000": 128, "00001": 128, "00002": 44}, sizes)
	first := ""
	for _, s := range l {
		if strings.HasPrefix(s.Name, "00000-dri-cdi.dev-node-a-") {
			first = s.Name
		}
	}
	require.NotEmpty(t, first)

	_, err = p.sync(ctx, testDevices(10))
	require.NoError(t, err)
	l, err = listSlices(client)
	require.NoError(t, err)
	require.Len(t, l, 1)
	require.Equal(t, first, l[0].Name, "the first slice is updated in place")
	require.Equal(t, int64(2), l[0].Spec.Pool.Generation)
	require.Equal(t, int64(1), l[0].Spec.Pool.ResourceSliceCount)
	require.Len(t, l[0].Spec.Devices, 10)
}

// An unchanged pool costs no write, also when the API server set the
// time of a taint, which the plugin's devices do not carry.
func TestPublisherWritesNothingWhenUpToDate(t *testing.T) {
	client := fakeClient()
	onSliceWrite(client, func(s *resourcev1.ResourceSlice) {
		for i := range s.Spec.Devices {
			for j := range s.Spec.Devices[i].Taints {
				if s.Spec.Devices[i].Taints[j].TimeAdded == nil {
					s.Spec.Devices[i].Taints[j].TimeAdded = &metav1.Time{Time: time.Unix(1e9, 0)}
				}
			}
		}
	})
	p := newSlicePublisher(apiOf(client), node, testEntry(t))
	devs := testDevices(3)
	devs[1].Taints = []draapi.DeviceTaint{{Key: UnavailableTaint, Value: UnavailableReason, Effect: draapi.DeviceTaintEffectNoSchedule}}
	ctx := context.Background()
	_, err := p.sync(ctx, devs)
	require.NoError(t, err)
	writes := sliceWrites(client)
	require.Equal(t, 1, writes)
	_, err = p.sync(ctx, testDevices(3)[:3:3])
	require.NoError(t, err)
	require.Equal(t, writes+1, sliceWrites(client), "the taint's removal is written")
	_, err = p.sync(ctx, devs)
	require.NoError(t, err)
	_, err = p.sync(ctx, devs)
	require.NoError(t, err)
	require.Equal(t, writes+2, sliceWrites(client), "a taint the server stamped is not written again")
}

// A slice someone else deletes or changes is written again, through the
// watch.
func TestPublisherRepairsTheSlice(t *testing.T) {
	client := fakeClient()
	api, watching := watchedAPI(client)
	p := newSlicePublisher(api, node, testEntry(t))
	synced := make(chan int, 100)
	p.synced = func(s []*draapi.ResourceSlice) { synced <- len(s) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	defer func() { cancel(); <-done }()
	p.set(testDevices(2))
	one := func() draapi.ResourceSlice {
		var l []draapi.ResourceSlice
		require.Eventually(t, func() bool {
			var err error
			l, err = listSlices(client)
			return err == nil && len(l) == 1 && len(l[0].Spec.Devices) == 2
		}, 30*time.Second, 5*time.Millisecond)
		return l[0]
	}
	s := one()
	<-watching
	require.NoError(t, client.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}))
	s = one()
	var k resourcev1.ResourceSlice
	require.NoError(t, convert(s, &k))
	k.Spec.Devices = k.Spec.Devices[:1]
	_, err := client.ResourceV1().ResourceSlices().Update(ctx, &k, metav1.UpdateOptions{})
	require.NoError(t, err)
	one()
}

// A node whose slice an earlier version wrote (the same name scheme,
// any generation) gets it updated in place at the next generation.
func TestPublisherTakesOverAnExistingSlice(t *testing.T) {
	client := fakeClient()
	old := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "00000-dri-cdi.dev-node-a-abcde"},
		Spec: resourcev1.ResourceSliceSpec{Driver: DriverName, NodeName: ptr.To(node),
			Pool: resourcev1.ResourcePool{Name: node, Generation: 7, ResourceSliceCount: 1}},
	}
	_, err := client.ResourceV1().ResourceSlices().Create(context.Background(), old, metav1.CreateOptions{})
	require.NoError(t, err)
	p := newSlicePublisher(apiOf(client), node, testEntry(t))
	_, err = p.sync(context.Background(), testDevices(2))
	require.NoError(t, err)
	l, err := listSlices(client)
	require.NoError(t, err)
	require.Len(t, l, 1)
	require.Equal(t, old.Name, l[0].Name)
	require.Equal(t, int64(8), l[0].Spec.Pool.Generation)
	require.Len(t, l[0].Spec.Devices, 2)
}

// A Node replaced by one of the same name (new UID): the garbage
// collector deletes the slices the old one owned, and the publisher
// writes them again owned by the new one.
func TestPublisherFollowsAReplacedNode(t *testing.T) {
	client := fakeClient()
	api, watching := watchedAPI(client)
	p := newSlicePublisher(api, node, testEntry(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	defer func() { cancel(); <-done }()
	p.set(testDevices(1))
	owner := func() string {
		l, err := listSlices(client)
		if err != nil || len(l) != 1 {
			return ""
		}
		return string(l[0].OwnerReferences[0].UID)
	}
	require.Eventually(t, func() bool { return owner() == "node-uid" }, 30*time.Second, 5*time.Millisecond)
	<-watching
	require.NoError(t, client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}))
	_, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "new-uid"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	l, err := listSlices(client)
	require.NoError(t, err)
	require.NoError(t, client.ResourceV1().ResourceSlices().Delete(ctx, l[0].Name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return owner() == "new-uid" }, 30*time.Second, 5*time.Millisecond)
}

// countingAPI counts the lists of slices.
type countingAPI struct {
	API
	lists atomic.Int64
}

func (c *countingAPI) ListSlices(ctx context.Context, selector string) (*draapi.ResourceSliceList, error) {
	c.lists.Add(1)
	return c.API.ListSlices(ctx, selector)
}

// The publisher's own writes, seen again through its watch, cause no
// sync: one list per change of the devices, none for the echoes.
func TestPublisherIgnoresItsOwnWrites(t *testing.T) {
	client := fakeClient()
	watched, watching := watchedAPI(client)
	api := &countingAPI{API: watched}
	p := newSlicePublisher(api, node, testEntry(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	defer func() { cancel(); <-done }()
	holds := func(n int) func() bool {
		return func() bool {
			l, err := listSlices(client)
			return err == nil && len(l) == 1 && len(l[0].Spec.Devices) == n
		}
	}
	p.set(testDevices(1))
	require.Eventually(t, holds(1), 30*time.Second, 5*time.Millisecond)
	<-watching
	for n := 2; n <= 4; n++ {
		p.set(testDevices(n))
		require.Eventually(t, holds(n), 30*time.Second, 5*time.Millisecond)
	}
	require.Never(t, func() bool { return api.lists.Load() > 4 }, 500*time.Millisecond, 10*time.Millisecond,
		"lists: %d", api.lists.Load())
	require.Equal(t, int64(4), api.lists.Load())
}

// An event that shows a slice holding what the publisher wants, before
// the answer of the write that made it was read, is no reason to sync;
// one that shows other devices, or a deletion, is.
func TestHoldsWanted(t *testing.T) {
	p := newSlicePublisher(apiOf(fakeClient()), node, testEntry(t))
	p.set(testDevices(2))
	ev := func(typ, name string, devs []draapi.Device, count int64) draapi.SliceEvent {
		return draapi.SliceEvent{Type: typ, Slice: draapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "9"},
			Spec: draapi.ResourceSliceSpec{Driver: DriverName, NodeName: ptr.To(node),
				Pool: draapi.ResourcePool{Name: node, Generation: 3, ResourceSliceCount: count}, Devices: devs}}}
	}
	first := sliceName(node, 0) + "x"
	require.True(t, p.holdsWanted(ev("ADDED", first, testDevices(2), 1)))
	require.True(t, p.holdsWanted(ev("MODIFIED", first, testDevices(2), 1)))
	require.False(t, p.holdsWanted(ev("MODIFIED", first, testDevices(1), 1)), "other devices")
	require.False(t, p.holdsWanted(ev("MODIFIED", first, testDevices(2), 2)), "another slice count")
	require.False(t, p.holdsWanted(ev("MODIFIED", sliceName(node, 1)+"x", testDevices(2), 1)), "another index")
	require.False(t, p.holdsWanted(ev("MODIFIED", "foreign", testDevices(2), 1)), "another name")
	require.False(t, p.holdsWanted(ev("DELETED", first, testDevices(2), 1)))
	require.False(t, p.echo(ev("MODIFIED", first, testDevices(2), 1)), "not written by the publisher")
	p.wrote(first, ownWrite{resourceVersion: "9"})
	require.True(t, p.echo(ev("MODIFIED", first, testDevices(1), 1)))
	require.False(t, p.echo(ev("DELETED", first, nil, 1)))
	p.wrote(first, ownWrite{deleted: true})
	require.True(t, p.echo(ev("DELETED", first, nil, 1)))
}
