package dra

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/dri-cdi/dri-cdi/cdi"
)

// doneQueue is the controller's work queue, telling when it finished a
// sync of a pool.
type doneQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	done chan string
}

func (q *doneQueue) Done(item string) {
	q.TypedRateLimitingInterface.Done(item)
	select {
	case q.done <- item:
	default:
	}
}

// sliceWrites are the create, update and delete calls on ResourceSlices
// the client saw.
func sliceWrites(c interface{ Actions() []k8stesting.Action }) []string {
	var out []string
	for _, a := range c.Actions() {
		if a.GetResource().Resource == "resourceslices" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a.GetVerb())
		}
	}
	return out
}

// The slice createFirstSlice makes is the one the helper's real
// ResourceSlice controller would make: handed the same devices, the
// controller syncs the pool and writes nothing.
func TestFirstSliceIsKeptByTheController(t *testing.T) {
	client := fakeClient()
	d, err := NewDriver(Options{NodeName: node, Kind: cdi.DefaultKind, SysfsRoot: t.TempDir(),
		PluginDataDir: t.TempDir(), RegistrarDir: t.TempDir(), KubeClient: client, Log: testEntry(t)})
	require.NoError(t, err)
	require.NoError(t, d.Update(testPools(), map[string]bool{"0000:01:00.0": true}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	created, err := d.createFirstSlice(ctx, d.inv.Devices)
	require.NoError(t, err)
	require.NotEmpty(t, created)
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	first := list.Items[0]
	require.Equal(t, created, first.Name)
	require.True(t, strings.HasPrefix(first.Name, "00000-dri-cdi.dev-"+node+"-"), first.Name)
	require.Equal(t, []string{"create"}, sliceWrites(client))

	q := &doneQueue{done: make(chan string, 1), TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueue(
		workqueue.DefaultTypedControllerRateLimiter[string]())}
	res := d.resources()
	c, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: DriverName, KubeClient: client, Queue: q, SyncDelay: ptr.To(time.Duration(0)),
		Owner:     &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: node},
		Resources: &res,
	})
	require.NoError(t, err)
	defer c.Stop()
	select {
	case pool := <-q.done:
		require.Equal(t, node, pool)
	case <-time.After(30 * time.Second):
		t.Fatal("the controller did not sync the pool")
	}
	require.Equal(t, resourceslice.Stats{}, c.GetStats(), "the controller changed the slice")
	require.Equal(t, []string{"create"}, sliceWrites(client))
	list, err = client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	require.Equal(t, first.Name, list.Items[0].Name)

	// A node that has a slice is left to the controller.
	created, err = d.createFirstSlice(ctx, d.inv.Devices)
	require.NoError(t, err)
	require.Empty(t, created)
}

// A Driver that is started creates the slice before the controller
// publishes, so the controller finds and keeps it.
func TestRunCreatesTheFirstSlice(t *testing.T) {
	client := fakeClient()
	e := start(t, t.TempDir(), t.TempDir(), client, "", testPools(), nil)
	var slices *resourceapi.ResourceSliceList
	require.Eventually(t, func() bool {
		var err error
		slices, err = client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
		return err == nil && len(slices.Items) == 1
	}, 30*time.Second, time.Millisecond)
	require.Len(t, slices.Items[0].Spec.Devices, 3)
	e.close()
	require.Equal(t, []string{"create"}, sliceWrites(client))
}
