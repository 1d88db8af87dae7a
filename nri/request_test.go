package nri

import (
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/alloc"
)

const (
	testKind = "dri-cdi.dev/gpu"
	resI915  = "dri-cdi.dev/i915"
	resXe    = "gpu.intel.com/xe"
	cardA    = "0000:00:02.0"
	cardB    = "0000:03:00.0"
)

// served is a ResourceFilter over a fixed set of names.
type served map[string]bool

func (s served) ServesResource(name string) bool { return s[name] }

var testServed = served{resI915: true, resXe: true}

func annotations(kv ...string) map[string]string {
	m := map[string]string{"io.kubernetes.container.hash": "1234"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func annotationOf(resource string, ids ...string) (string, string) {
	return alloc.Annotation(resource, ids)
}

func cdiDevices(names ...string) []*api.CDIDevice {
	var out []*api.CDIDevice
	for _, n := range names {
		out = append(out, &api.CDIDevice{Name: n})
	}
	return out
}

func TestParseRequest(t *testing.T) {
	kA, vA := annotationOf(resI915, cardA)
	kX, vX := annotationOf(resXe, alloc.ReplicaID(cardB, 1), alloc.ReplicaID(cardB, 0))
	kO, vO := annotationOf("example.com/other", cardA)
	tests := map[string]struct {
		ctr     *api.Container
		want    request
		wantErr string
	}{
		"nothing": {
			ctr:  &api.Container{Annotations: annotations()},
			want: request{},
		},
		"nil annotations": {
			ctr:  &api.Container{},
			want: request{},
		},
		"one annotation": {
			ctr:  &api.Container{Annotations: annotations(kA, vA)},
			want: request{annotated: []alloc.Request{{Resource: resI915, DeviceIDs: []string{cardA}}}},
		},
		"two resources, replicas": {
			ctr: &api.Container{Annotations: annotations(kA, vA, kX, vX)},
			want: request{annotated: []alloc.Request{
				{Resource: resI915, DeviceIDs: []string{cardA}},
				{Resource: resXe, DeviceIDs: []string{cardB + "::0", cardB + "::1"}},
			}},
		},
		"resource not served": {
			ctr:  &api.Container{Annotations: annotations(kO, vO)},
			want: request{},
		},
		"cdi devices of our kind": {
			ctr: &api.Container{CDIDevices: cdiDevices(
				"vendor.com/net=eth0", testKind+"="+cardB, testKind+"="+cardA, testKind+"="+cardA, testKind+"=all")},
			want: request{cdiCards: []string{cardA, cardB, "all"}},
		},
		"cdi device of a kind with our kind as prefix": {
			ctr:  &api.Container{CDIDevices: cdiDevices(testKind + "x=" + cardA)},
			want: request{},
		},
		"garbage annotation": {
			ctr:     &api.Container{Annotations: annotations(alloc.AnnotationPrefix+"dri-cdi.dev_i915", "garbage")},
			wantErr: "not <resource>=<id>",
		},
		"path traversal in annotation": {
			ctr:     &api.Container{Annotations: annotations(kA, resI915+"=../../dev/sda")},
			wantErr: "invalid character",
		},
		"resource under another key": {
			ctr:     &api.Container{Annotations: annotations(kA, resXe+"="+cardA)},
			wantErr: "belongs under key",
		},
		"traversal in cdi name": {
			ctr:     &api.Container{CDIDevices: cdiDevices(testKind + "=../../etc")},
			wantErr: "invalid character",
		},
		"empty cdi device name": {
			ctr:     &api.Container{CDIDevices: cdiDevices(testKind + "=")},
			wantErr: "empty card ID",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseRequest(tc.ctr, testKind, testServed)
			requireOutcome(t, got, err, ErrBadRequest, tc.wantErr, tc.want)
		})
	}
}

func TestAuthorize(t *testing.T) {
	req := func(annotated []alloc.Request, cdi ...string) request {
		return request{annotated: annotated, cdiCards: cdi}
	}
	cl := func(res string, ids ...string) alloc.Request { return alloc.Request{Resource: res, DeviceIDs: ids} }
	tests := map[string]struct {
		req       request
		allocated map[string][]string
		want      decision
		wantErr   string
	}{
		"annotation allocated": {
			req:       req([]alloc.Request{cl(resI915, cardA)}),
			allocated: map[string][]string{resI915: {cardA}},
			want:      decision{cards: []string{cardA}},
		},
		"replicas of one card give the card once": {
			req:       req([]alloc.Request{cl(resXe, cardB+"::0", cardB+"::1")}),
			allocated: map[string][]string{resXe: {cardB + "::1", cardB + "::0"}},
			want:      decision{cards: []string{cardB}},
		},
		"forged annotation, nothing allocated": {
			req:  req([]alloc.Request{cl(resI915, cardA)}),
			want: decision{denied: []string{resI915 + "=" + cardA}},
		},
		"annotation beyond the allocation": {
			req:       req([]alloc.Request{cl(resI915, cardA, cardB)}),
			allocated: map[string][]string{resI915: {cardA}},
			want:      decision{cards: []string{cardA}, denied: []string{resI915 + "=" + cardB}},
		},
		"allocated under another served resource": {
			req:       req([]alloc.Request{cl(resI915, cardA)}),
			allocated: map[string][]string{resXe: {cardA}},
			want:      decision{denied: []string{resI915 + "=" + cardA}},
		},
		"allocated under a resource we do not serve": {
			req:       req([]alloc.Request{cl(resI915, cardA)}, cardA),
			allocated: map[string][]string{"example.com/gpu": {cardA}},
			wantErr:   cardA,
		},
		"cdi device allocated": {
			req:       req(nil, cardA),
			allocated: map[string][]string{resI915: {cardA}},
			want:      decision{cards: []string{cardA}},
		},
		"cdi device of an allocated replica": {
			req:       req(nil, cardB),
			allocated: map[string][]string{resXe: {cardB + "::3"}},
			want:      decision{cards: []string{cardB}},
		},
		"cdi device not allocated": {
			req:       req([]alloc.Request{cl(resI915, cardA)}, cardA, cardB),
			allocated: map[string][]string{resI915: {cardA}},
			wantErr:   cardB,
		},
		"cdi all is never allocated": {
			req:       req(nil, "all"),
			allocated: map[string][]string{resI915: {cardA, "all"}},
			wantErr:   "all",
		},
		"kubelet reports garbage IDs": {
			req:       req([]alloc.Request{cl(resI915, cardA)}),
			allocated: map[string][]string{resI915: {"../x", ""}},
			want:      decision{denied: []string{resI915 + "=" + cardA}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := authorize(tc.req, tc.allocated, testServed)
			requireOutcome(t, got, err, ErrNotAllocated, tc.wantErr, tc.want)
		})
	}
}

// FuzzParseRequest feeds arbitrary annotation and CDI names: parsing must
// never panic, and whatever it accepts must be valid card IDs and annotations
// of served resources.
func FuzzParseRequest(f *testing.F) {
	kA, vA := annotationOf(resI915, cardA)
	f.Add(kA, vA, testKind+"="+cardA)
	f.Add(alloc.AnnotationPrefix+"x", "x=../../a", testKind+"=../b")
	f.Add(kA, resI915+"=a::1,a::2,a::1", testKind+"=all")
	f.Add(alloc.AnnotationPrefix, "=", "=")
	f.Fuzz(func(t *testing.T, key, value, cdiName string) {
		ctr := &api.Container{
			Annotations: map[string]string{key: value},
			CDIDevices:  cdiDevices(cdiName),
		}
		req, err := parseRequest(ctr, testKind, testServed)
		if err != nil {
			require.ErrorIs(t, err, ErrBadRequest)
			return
		}
		for _, c := range req.cdiCards {
			if c != cdi.AllDevice {
				require.NoError(t, alloc.ValidCardID(c))
			}
			require.False(t, strings.Contains(c, "/"))
		}
		for _, a := range req.annotated {
			require.True(t, testServed.ServesResource(a.Resource))
			for _, id := range a.DeviceIDs {
				require.NotEmpty(t, alloc.CardID(id))
			}
		}
		// Whatever was accepted authorizes without panicking.
		_, _ = authorize(req, map[string][]string{resI915: {cardA}}, testServed)
	})
}

// requireOutcome checks one case of a table: with wantErr, an error that
// wraps sentinel and says wantErr; without, no error and want.
func requireOutcome[T any](t *testing.T, got T, err, sentinel error, wantErr string, want T) {
	t.Helper()
	if wantErr != "" {
		require.ErrorIs(t, err, sentinel)
		require.ErrorContains(t, err, wantErr)
		return
	}
	require.NoError(t, err)
	require.Equal(t, want, got)
}
