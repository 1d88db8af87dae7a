package alloc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseDeviceID(t *testing.T) {
	for name, tc := range map[string]struct {
		id      string
		card    string
		replica int
		wantErr string
	}{
		"pci":             {id: "0000:00:02.0", card: "0000:00:02.0", replica: -1},
		"platform":        {id: "simple-framebuffer.0", card: "simple-framebuffer.0", replica: -1},
		"replica":         {id: "0000:03:00.0::2", card: "0000:03:00.0", replica: 2},
		"empty":           {id: "", wantErr: "empty card ID"},
		"traversal":       {id: "../../etc/passwd", wantErr: "invalid character"},
		"slash":           {id: "a/b", wantErr: "invalid character"},
		"bad replica":     {id: "0000:00:02.0::x", wantErr: "not a non-negative integer"},
		"negative":        {id: "0000:00:02.0::-1", wantErr: "not a non-negative integer"},
		"leading zero":    {id: "0000:00:02.0::01", wantErr: "not a non-negative integer"},
		"double sep":      {id: "a::1::2", wantErr: "not a non-negative integer"},
		"leading punct":   {id: ".hidden", wantErr: "invalid character"},
		"too long":        {id: strings.Repeat("a", 129), wantErr: "more than 128"},
		"space":           {id: "card 0", wantErr: "invalid character"},
		"empty card part": {id: "::1", wantErr: "empty card ID"},
		"reserved all":    {id: "all", wantErr: "reserved"},
	} {
		t.Run(name, func(t *testing.T) {
			card, rep, err := ParseDeviceID(tc.id)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, ErrBadDeviceID)
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.card, card)
			require.Equal(t, tc.replica, rep)
			if rep >= 0 {
				require.Equal(t, tc.id, ReplicaID(card, rep))
			}
		})
	}
}

func TestAnnotationRoundTrip(t *testing.T) {
	for name, tc := range map[string]struct {
		resource string
		ids      []string
		wantKey  string
	}{
		"default pool": {resource: "dri-cdi.dev/i915", ids: []string{"0000:03:00.0", "0000:00:02.0"}, wantKey: "dri-cdi.dev/alloc.dri-cdi.dev_i915"},
		"compat name":  {resource: "gpu.intel.com/i915", ids: []string{"0000:00:02.0::1"}, wantKey: "dri-cdi.dev/alloc.gpu.intel.com_i915"},
		"long name":    {resource: "example.com/" + strings.Repeat("x", 80), ids: []string{"vkms"}},
	} {
		t.Run(name, func(t *testing.T) {
			key, value := Annotation(tc.resource, tc.ids)
			if tc.wantKey != "" {
				require.Equal(t, tc.wantKey, key)
			}
			require.True(t, strings.HasPrefix(key, AnnotationPrefix))
			require.LessOrEqual(t, len(strings.TrimPrefix(key, "dri-cdi.dev/")), 63)
			reqs, err := Parse(map[string]string{key: value, "unrelated": "x"})
			require.NoError(t, err)
			require.Len(t, reqs, 1)
			require.Equal(t, tc.resource, reqs[0].Resource)
			require.ElementsMatch(t, tc.ids, reqs[0].DeviceIDs)
		})
	}
}

// TestAnnotationValue: the value lists the IDs sorted, whatever order
// the kubelet asked in, leaves the caller's slice alone, and is the value
// Annotation gives.
func TestAnnotationValue(t *testing.T) {
	ids := []string{"0000:03:00.0", "0000:00:02.0::1", "0000:00:02.0"}
	got := AnnotationValue("dri-cdi.dev/i915", ids)
	require.Equal(t, "dri-cdi.dev/i915=0000:00:02.0,0000:00:02.0::1,0000:03:00.0", got)
	require.Equal(t, []string{"0000:03:00.0", "0000:00:02.0::1", "0000:00:02.0"}, ids)
	key, value := Annotation("dri-cdi.dev/i915", ids)
	require.Equal(t, AnnotationKey("dri-cdi.dev/i915"), key)
	require.Equal(t, got, value)
}

func TestLongKeysDoNotCollide(t *testing.T) {
	a := AnnotationKey("example.com/" + strings.Repeat("x", 80) + "a")
	b := AnnotationKey("example.com/" + strings.Repeat("x", 80) + "b")
	require.NotEqual(t, a, b)
}

func TestParseErrors(t *testing.T) {
	key := AnnotationKey("dri-cdi.dev/i915")
	for name, tc := range map[string]struct {
		annotations map[string]string
		wantErr     string
	}{
		"no equals":       {map[string]string{key: "0000:00:02.0"}, "is not <resource>=<id>"},
		"empty list":      {map[string]string{key: "dri-cdi.dev/i915="}, "no device IDs"},
		"key mismatch":    {map[string]string{key: "dri-cdi.dev/xe=0000:00:02.0"}, "belongs under key"},
		"traversal":       {map[string]string{key: "dri-cdi.dev/i915=../../dev/sda"}, "invalid character"},
		"empty id":        {map[string]string{key: "dri-cdi.dev/i915=0000:00:02.0,"}, "empty card ID"},
		"empty resource":  {map[string]string{AnnotationPrefix: "=x"}, "invalid resource name"},
		"huge":            {map[string]string{key: "dri-cdi.dev/i915=" + strings.Repeat("a,", 40000)}, "more than 64 KiB"},
		"garbage unicode": {map[string]string{key: "dri-cdi.dev/i915=\xff\xfe"}, "invalid character"},
	} {
		t.Run(name, func(t *testing.T) {
			reqs, err := Parse(tc.annotations)
			require.ErrorIs(t, err, ErrBadAnnotation)
			require.ErrorContains(t, err, tc.wantErr)
			require.Nil(t, reqs)
		})
	}
}

func TestParseDeduplicatesAndIgnoresOthers(t *testing.T) {
	key := AnnotationKey("dri-cdi.dev/i915")
	reqs, err := Parse(map[string]string{
		key:                       "dri-cdi.dev/i915=b,a,b",
		"io.kubernetes.pod.name":  "x",
		"dri-cdi.dev/other-thing": "y",
	})
	require.NoError(t, err)
	require.Equal(t, []Request{{Resource: "dri-cdi.dev/i915", DeviceIDs: []string{"a", "b"}}}, reqs)
}

func FuzzParse(f *testing.F) {
	key := AnnotationKey("dri-cdi.dev/i915")
	f.Add(key, "dri-cdi.dev/i915=0000:00:02.0,0000:03:00.0::1")
	f.Add(key, "")
	f.Add(AnnotationPrefix+"x", "x=../a")
	f.Fuzz(func(t *testing.T, k, v string) {
		reqs, err := Parse(map[string]string{k: v})
		if err != nil {
			require.Nil(t, reqs)
			return
		}
		for _, c := range reqs {
			require.Equal(t, k, AnnotationKey(c.Resource))
			for _, id := range c.DeviceIDs {
				card, _, err := ParseDeviceID(id)
				require.NoError(t, err)
				require.NotContains(t, card, "/")
			}
		}
	})
}

func FuzzParseDeviceID(f *testing.F) {
	f.Add("0000:00:02.0::3")
	f.Add("vkms")
	f.Fuzz(func(t *testing.T, id string) {
		card, rep, err := ParseDeviceID(id)
		if err != nil {
			return
		}
		require.NoError(t, ValidCardID(card))
		if rep >= 0 {
			require.Equal(t, id, ReplicaID(card, rep))
		} else {
			require.Equal(t, id, card)
		}
	})
}
