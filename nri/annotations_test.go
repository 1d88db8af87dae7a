package nri

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
)

func TestParseRequestCDIAnnotations(t *testing.T) {
	tests := map[string]struct {
		ctr     *api.Container
		want    []string
		wantErr string
	}{
		"names of our kind in cdi.k8s.io annotations": {
			ctr: &api.Container{Annotations: annotations(
				"cdi.k8s.io/other-plugin", "vendor.com/net=eth0,"+testKind+"="+cardB,
				"cdi.k8s.io/ours", testKind+"="+cardA)},
			want: []string{cardA, cardB},
		},
		"annotations and CDIDevices together, once each": {
			ctr: &api.Container{
				Annotations: annotations("cdi.k8s.io/x", testKind+"="+cardA),
				CDIDevices:  cdiDevices(testKind + "=" + cardA),
			},
			want: []string{cardA},
		},
		"other prefixes are not CDI annotations": {
			ctr:  &api.Container{Annotations: annotations("example.com/cdi", testKind+"="+cardA)},
			want: nil,
		},
		"traversal in an annotation name": {
			ctr:     &api.Container{Annotations: annotations("cdi.k8s.io/x", testKind+"=../../etc")},
			wantErr: "invalid character",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseRequest(tc.ctr, testKind, testServed)
			requireOutcome(t, got.cdiCards, err, ErrBadRequest, tc.wantErr, tc.want)
		})
	}
}

// A name of our kind in a cdi.k8s.io annotation is authorized like one in
// Container.CDIDevices: not allocated, the container fails.
func TestCDIAnnotationNotAllocatedFails(t *testing.T) {
	req, err := parseRequest(&api.Container{Annotations: annotations("cdi.k8s.io/sneaky", testKind+"="+cardB)}, testKind, testServed)
	require.NoError(t, err)
	_, err = authorize(req, map[string][]string{resI915: {cardA}}, testServed)
	require.ErrorIs(t, err, ErrNotAllocated)
	require.ErrorContains(t, err, cardB)

	dec, err := authorize(req, map[string][]string{resI915: {cardB}}, testServed)
	require.NoError(t, err)
	require.Equal(t, []string{cardB}, dec.cards)
}
