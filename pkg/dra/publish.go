package dra

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dri-cdi/dri-cdi/pkg/backoff"
	"github.com/dri-cdi/dri-cdi/pkg/draapi"
)

// API is what dri-cdi-dra asks of the API server (draapi.Client).
type API interface {
	GetClaim(ctx context.Context, namespace, name string) (*draapi.ResourceClaim, error)
	NodeUID(ctx context.Context, name string) (types.UID, error)
	ListSlices(ctx context.Context, selector string) (*draapi.ResourceSliceList, error)
	CreateSlice(ctx context.Context, s *draapi.ResourceSlice) (*draapi.ResourceSlice, error)
	UpdateSlice(ctx context.Context, s *draapi.ResourceSlice) (*draapi.ResourceSlice, error)
	DeleteSlice(ctx context.Context, name string, uid types.UID) error
	WatchSlices(ctx context.Context, selector, resourceVersion string, fn func(draapi.SliceEvent)) error
}

// The node's ResourceSlices.
//
// The node's cards are one pool named after the node, published in as
// few slices as the API allows (draapi.ResourceSliceMaxDevices devices
// each; one slice, empty or not, for a node of up to 128 cards). Each
// slice is named "<index in 5 hex digits>-<driver>-<node>-<suffix>" (the
// API server adds the suffix), owned by the Node (so that it goes with
// the Node), and carries the pool's generation and slice count, the
// names and form the kubeletplugin helper's ResourceSlice controller
// gives them, so that an update from a version that used it keeps its
// slices.
//
// A sync lists the node's slices of this driver and does nothing when
// they hold the devices already; otherwise it writes the pool again
// with the next generation: it updates the slices it has in place,
// creates the missing ones and deletes the rest. The first sync of a
// fresh plugin is a list, a GET of the Node and a create (three round
// trips, docs/performance.md). A watch of the same slices asks for a sync
// when someone else changes or deletes one; the echoes of the
// publisher's own writes are recognized by their resourceVersion and
// ignored. A failed sync is retried with backoff, and every
// sliceResync the slices are checked anyway.

const (
	sliceResync     = 10 * time.Minute
	syncRetryMin    = 100 * time.Millisecond
	syncRetryMax    = 30 * time.Second
	watchRetryMin   = 500 * time.Millisecond
	watchRetryMax   = 30 * time.Second
	syncCallTimeout = 30 * time.Second
)

// sliceName is the GenerateName of the pool's slice index i.
func sliceName(nodeName string, i int) string {
	return fmt.Sprintf("%05x-%s-%s-", i, DriverName, nodeName)
}

type slicePublisher struct {
	api  API
	node string
	log  *logrus.Entry
	// synced is called after each sync that left the API server holding
	// the devices, with the slices as stored.
	synced func(stored []*draapi.ResourceSlice)
	// failed is called after each failed sync.
	failed func(err error)

	mu      sync.Mutex
	devices []draapi.Device
	have    bool
	// own is what this publisher did last to each slice, by name, to
	// recognize the echoes.
	own map[string]ownWrite
	// ownerUID is the Node's UID, read again after a slice of ours was
	// deleted by someone else (the garbage collector deletes them when
	// the Node was replaced by one of the same name).
	ownerUID  types.UID
	readOwner bool
	// listed takes the resourceVersion of the first successful sync's
	// list, so that the watch starts where the sync looked without a list
	// of its own.
	listed chan string
	kick   chan struct{}
}

// ownWrite is the resourceVersion a write of the publisher gave a slice,
// or its deletion.
type ownWrite struct {
	resourceVersion string
	deleted         bool
}

func newSlicePublisher(api API, node string, log *logrus.Entry) *slicePublisher {
	return &slicePublisher{api: api, node: node, log: log, own: map[string]ownWrite{}, kick: make(chan struct{}, 1), listed: make(chan string, 1),
		synced: func([]*draapi.ResourceSlice) {}, failed: func(error) {}}
}

// set makes devices the pool's devices and asks for a sync.
func (p *slicePublisher) set(devices []draapi.Device) {
	p.mu.Lock()
	p.devices, p.have = slices.Clone(devices), true
	p.mu.Unlock()
	p.poke()
}

func (p *slicePublisher) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *slicePublisher) selector() string { return draapi.SliceSelector(DriverName, p.node) }

// run syncs on every change, retry and resync until ctx ends.
func (p *slicePublisher) run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { p.watch(ctx) })
	retry := backoff.New(syncRetryMin, syncRetryMax)
	resync := time.NewTicker(sliceResync)
	defer resync.Stop()
	var again <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		case <-again:
		case <-resync.C:
		}
		p.mu.Lock()
		devices, have := p.devices, p.have
		p.mu.Unlock()
		if !have {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, syncCallTimeout)
		stored, err := p.sync(sctx, devices)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			wait := retry.Next()
			p.failed(err)
			p.log.WithError(err).WithField("retry_in", wait).Warn("cannot publish the node's ResourceSlice")
			again = time.After(wait)
			continue
		}
		retry.Reset()
		again = nil
		p.synced(stored)
	}
}

// chunks splits devices into the pool's slices.
func chunks(devices []draapi.Device) [][]draapi.Device {
	out := [][]draapi.Device{}
	for len(devices) > draapi.ResourceSliceMaxDevices {
		out = append(out, devices[:draapi.ResourceSliceMaxDevices])
		devices = devices[draapi.ResourceSliceMaxDevices:]
	}
	return append(out, devices)
}

// sync makes the node's slices hold devices, and returns them as stored.
func (p *slicePublisher) sync(ctx context.Context, devices []draapi.Device) (_ []*draapi.ResourceSlice, err error) {
	list, err := p.api.ListSlices(ctx, p.selector())
	if err != nil {
		return nil, fmt.Errorf("list the node's ResourceSlices: %w", err)
	}
	defer func() {
		if err == nil {
			select {
			case p.listed <- list.ResourceVersion:
			default:
			}
		}
	}()
	var have, stale []*draapi.ResourceSlice
	for i := range list.Items {
		s := &list.Items[i]
		// The selector picks this driver and node; a slice of another
		// pool of ours (none is written today) is removed.
		if s.Spec.Pool.Name == p.node {
			have = append(have, s)
		} else {
			stale = append(stale, s)
		}
	}
	slices.SortFunc(have, func(a, b *draapi.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })
	want := chunks(devices)
	if upToDate(have, want) && len(stale) == 0 {
		return have, nil
	}
	p.mu.Lock()
	owner := p.ownerUID
	if p.readOwner {
		owner, p.readOwner = "", false
	}
	p.mu.Unlock()
	if owner == "" {
		uid, err := p.api.NodeUID(ctx, p.node)
		if err != nil {
			return nil, fmt.Errorf("get node %q: %w", p.node, err)
		}
		owner = uid
		p.mu.Lock()
		p.ownerUID = owner
		p.mu.Unlock()
	}
	var gen int64
	for _, s := range have {
		gen = max(gen, s.Spec.Pool.Generation)
	}
	gen++
	stored := make([]*draapi.ResourceSlice, len(want))
	for i, devs := range want {
		s := &draapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{
				GenerateName: sliceName(p.node, i),
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: p.node, UID: owner, Controller: ptr.To(true),
				}},
			},
			Spec: draapi.ResourceSliceSpec{
				Driver:   DriverName,
				Pool:     draapi.ResourcePool{Name: p.node, Generation: gen, ResourceSliceCount: int64(len(want))},
				NodeName: ptr.To(p.node),
				Devices:  devs,
			},
		}
		var out *draapi.ResourceSlice
		if i < len(have) {
			old := have[i]
			s.Name, s.ResourceVersion, s.UID = old.Name, old.ResourceVersion, old.UID
			s.Labels, s.Annotations = old.Labels, old.Annotations
			s.Spec.Devices = keepTaintTimes(devs, old.Spec.Devices)
			out, err = p.api.UpdateSlice(ctx, s)
		} else {
			out, err = p.api.CreateSlice(ctx, s)
		}
		if err != nil {
			return nil, fmt.Errorf("write the node's ResourceSlice %d of %d: %w", i+1, len(want), err)
		}
		p.wrote(out.Name, ownWrite{resourceVersion: out.ResourceVersion})
		stored[i] = out
	}
	for _, s := range append(stale, have[min(len(want), len(have)):]...) {
		p.wrote(s.Name, ownWrite{deleted: true})
		if err := p.api.DeleteSlice(ctx, s.Name, s.UID); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("delete the obsolete ResourceSlice %s: %w", s.Name, err)
		}
	}
	return stored, nil
}

// upToDate reports whether have, sorted by name, is the pool of want at
// one generation.
func upToDate(have []*draapi.ResourceSlice, want [][]draapi.Device) bool {
	if len(have) != len(want) {
		return false
	}
	for i, s := range have {
		if s.Spec.Pool.Generation != have[0].Spec.Pool.Generation || s.Spec.Pool.ResourceSliceCount != int64(len(want)) ||
			s.DeletionTimestamp != nil || !sameJSON(keepTaintTimes(want[i], s.Spec.Devices), s.Spec.Devices) {
			return false
		}
	}
	return true
}

// sameJSON compares two device lists in their API form, where equal
// quantities are equal text and map keys are sorted.
func sameJSON(a, b []draapi.Device) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

// keepTaintTimes is devs with each taint's TimeAdded, which the API
// server sets, copied from the same taint of the same device in old.
func keepTaintTimes(devs, old []draapi.Device) []draapi.Device {
	var out []draapi.Device
	for i, d := range devs {
		if len(d.Taints) == 0 {
			continue
		}
		j := slices.IndexFunc(old, func(o draapi.Device) bool { return o.Name == d.Name })
		if j < 0 {
			continue
		}
		if out == nil {
			out = slices.Clone(devs)
		}
		taints := slices.Clone(d.Taints)
		for k, t := range taints {
			for _, o := range old[j].Taints {
				if o.Key == t.Key && o.Value == t.Value && o.Effect == t.Effect && t.TimeAdded == nil {
					taints[k].TimeAdded = o.TimeAdded
				}
			}
		}
		out[i].Taints = taints
	}
	if out == nil {
		return devs
	}
	return out
}

func (p *slicePublisher) wrote(name string, w ownWrite) {
	p.mu.Lock()
	p.own[name] = w
	p.mu.Unlock()
}

// echo reports whether ev is what one of this publisher's writes did.
func (p *slicePublisher) echo(ev draapi.SliceEvent) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.own[ev.Slice.Name]
	if ev.Type == "DELETED" {
		return ok && w.deleted
	}
	return ok && !w.deleted && w.resourceVersion != "" && w.resourceVersion == ev.Slice.ResourceVersion
}

// holdsWanted reports whether the slice of an ADDED or MODIFIED event
// holds what the publisher wants in its place (by the index of its name):
// whoever wrote it, there is nothing to sync. It catches the echo of a
// write whose answer the publisher has not read yet.
func (p *slicePublisher) holdsWanted(ev draapi.SliceEvent) bool {
	if ev.Type != "ADDED" && ev.Type != "MODIFIED" {
		return false
	}
	s := ev.Slice
	p.mu.Lock()
	devices := p.devices
	p.mu.Unlock()
	want := chunks(devices)
	i := -1
	for j := range want {
		if strings.HasPrefix(s.Name, sliceName(p.node, j)) {
			i = j
		}
	}
	return i >= 0 && s.Spec.Driver == DriverName && s.Spec.Pool.Name == p.node &&
		s.Spec.NodeName != nil && *s.Spec.NodeName == p.node && s.Spec.Pool.ResourceSliceCount == int64(len(want)) &&
		sameJSON(keepTaintTimes(want[i], s.Spec.Devices), s.Spec.Devices)
}

// watch asks for a sync whenever someone else changes the node's
// slices. It starts from the first successful sync's list, and after
// that from a list of its own, followed by a sync for what it may have
// missed while it was down.
func (p *slicePublisher) watch(ctx context.Context) {
	retry := backoff.New(watchRetryMin, watchRetryMax)
	var rv string
	select {
	case <-ctx.Done():
		return
	case rv = <-p.listed:
	}
	for ctx.Err() == nil {
		var err error
		if rv == "" {
			var list *draapi.ResourceSliceList
			if list, err = p.api.ListSlices(ctx, p.selector()); err == nil {
				rv = list.ResourceVersion
				p.poke()
			}
		}
		if err == nil {
			err = p.api.WatchSlices(ctx, p.selector(), rv, func(ev draapi.SliceEvent) {
				switch {
				case ev.Type == "BOOKMARK":
				case ev.Type == "ERROR":
					// 410 Gone: the resourceVersion expired; the server
					// ends the watch, and it starts again with a list.
					if ev.Status == nil || ev.Status.Code != 410 {
						p.log.WithField("status", ev.Status).Warn("the ResourceSlice watch reported an error")
					}
				case !p.echo(ev) && !p.holdsWanted(ev):
					p.log.WithFields(logrus.Fields{"event": ev.Type, "slice": ev.Slice.Name}).Debug("the node's ResourceSlice changed; publishing again")
					if ev.Type == "DELETED" {
						p.mu.Lock()
						p.readOwner = true
						p.mu.Unlock()
					}
					p.poke()
				}
			})
			rv = ""
			if err == nil && ctx.Err() == nil {
				// The server ended the watch (its timeout) or the
				// resourceVersion expired: list and watch again.
				retry.Reset()
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		wait := retry.Next()
		p.log.WithError(err).WithField("retry_in", wait).Debug("the ResourceSlice watch stopped")
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}
