package dra

import (
	"context"
	"encoding/json"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
)

// fakeAPI is the API over client-go's fake clientset, whose object
// tracker keeps the objects as the API server would (resourceVersions,
// NotFound, AlreadyExists); objects cross between the real types and
// draapi's in their JSON form, as they do on the wire.
type fakeAPI struct {
	c *fake.Clientset
	// watching, when set, is sent to once each watch is established:
	// the fake's watch carries the events from then on, where the API
	// server's replays them from the resourceVersion asked for.
	watching chan struct{}
}

func apiOf(c *fake.Clientset) API { return fakeAPI{c: c} }

// watchedAPI is apiOf(c) and a channel that gets a value each time the
// publisher's watch is established.
func watchedAPI(c *fake.Clientset) (API, chan struct{}) {
	ch := make(chan struct{}, 16)
	return fakeAPI{c: c, watching: ch}, ch
}

// convert decodes in's JSON form into out.
func convert(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// k8sClaim is c in the real type.
func k8sClaim(c *draapi.ResourceClaim) *resourcev1.ResourceClaim {
	var out resourcev1.ResourceClaim
	if err := convert(c, &out); err != nil {
		panic(fmt.Sprintf("claim %s: %v", c.Name, err))
	}
	return &out
}

func (f fakeAPI) GetClaim(ctx context.Context, namespace, name string) (*draapi.ResourceClaim, error) {
	c, err := f.c.ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var out draapi.ResourceClaim
	return &out, convert(c, &out)
}

func (f fakeAPI) NodeUID(ctx context.Context, name string) (types.UID, error) {
	n, err := f.c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return n.UID, nil
}

// ListSlices filters by the selector itself: the fake tracker ignores
// field selectors.
func (f fakeAPI) ListSlices(ctx context.Context, selector string) (*draapi.ResourceSliceList, error) {
	l, err := f.c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var all draapi.ResourceSliceList
	if err := convert(l, &all); err != nil {
		return nil, err
	}
	out := &draapi.ResourceSliceList{ListMeta: all.ListMeta}
	for _, s := range all.Items {
		if s.Spec.NodeName != nil && draapi.SliceSelector(s.Spec.Driver, *s.Spec.NodeName) == selector {
			out.Items = append(out.Items, s)
		}
	}
	return out, nil
}

func (f fakeAPI) write(ctx context.Context, s *draapi.ResourceSlice, create bool) (*draapi.ResourceSlice, error) {
	var in resourcev1.ResourceSlice
	if err := convert(s, &in); err != nil {
		return nil, err
	}
	var got *resourcev1.ResourceSlice
	var err error
	if create {
		got, err = f.c.ResourceV1().ResourceSlices().Create(ctx, &in, metav1.CreateOptions{})
	} else {
		got, err = f.c.ResourceV1().ResourceSlices().Update(ctx, &in, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, err
	}
	var out draapi.ResourceSlice
	return &out, convert(got, &out)
}

func (f fakeAPI) CreateSlice(ctx context.Context, s *draapi.ResourceSlice) (*draapi.ResourceSlice, error) {
	return f.write(ctx, s, true)
}

func (f fakeAPI) UpdateSlice(ctx context.Context, s *draapi.ResourceSlice) (*draapi.ResourceSlice, error) {
	return f.write(ctx, s, false)
}

func (f fakeAPI) DeleteSlice(ctx context.Context, name string, uid types.UID) error {
	return f.c.ResourceV1().ResourceSlices().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

func (f fakeAPI) WatchSlices(ctx context.Context, selector, _ string, fn func(draapi.SliceEvent)) error {
	w, err := f.c.ResourceV1().ResourceSlices().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	defer w.Stop()
	if f.watching != nil {
		f.watching <- struct{}{}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			out := draapi.SliceEvent{Type: string(ev.Type)}
			if err := convert(ev.Object, &out.Slice); err != nil {
				return err
			}
			if out.Slice.Spec.NodeName != nil && draapi.SliceSelector(out.Slice.Spec.Driver, *out.Slice.Spec.NodeName) == selector {
				fn(out)
			}
		}
	}
}

// listSlices is every slice in the fake API server.
func listSlices(c *fake.Clientset) ([]draapi.ResourceSlice, error) {
	l, err := c.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out draapi.ResourceSliceList
	return out.Items, convert(l, &out)
}

// onSliceWrite has the fake API server pass every slice it is asked to
// create or update through fn before storing it, as an API server that
// sets or drops fields does.
func onSliceWrite(c *fake.Clientset, fn func(*resourcev1.ResourceSlice)) {
	react := func(a k8stesting.Action) (bool, runtime.Object, error) {
		var s *resourcev1.ResourceSlice
		switch a := a.(type) {
		case k8stesting.CreateAction:
			s, _ = a.GetObject().(*resourcev1.ResourceSlice)
		case k8stesting.UpdateAction:
			s, _ = a.GetObject().(*resourcev1.ResourceSlice)
		}
		if s != nil {
			fn(s)
		}
		return false, nil, nil
	}
	c.PrependReactor("create", "resourceslices", react)
	c.PrependReactor("update", "resourceslices", react)
}
