package draapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// request is what the stub server saw of one request.
type request struct {
	method, path, query, contentType, body string
}

// stubServer answers each request with the next of answers (code, body)
// and records the requests.
func stubServer(t *testing.T, answers ...[2]string) (*Client, *[]request) {
	t.Helper()
	var mu sync.Mutex
	var seen []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		i := len(seen)
		seen = append(seen, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), string(b)})
		mu.Unlock()
		require.Less(t, i, len(answers), "unexpected request %s %s", r.Method, r.URL)
		w.Header().Set("Content-Type", "application/json")
		code := http.StatusOK
		if answers[i][0] != "" {
			code = map[string]int{"404": 404, "409": 409}[answers[i][0]]
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, answers[i][1])
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(&rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000})
	require.NoError(t, err)
	return c, &seen
}

const notFound = `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"NotFound","code":404,"message":"resourceclaims.resource.k8s.io \"x\" not found"}`

func TestClientRequests(t *testing.T) {
	ctx := context.Background()
	c, seen := stubServer(t,
		[2]string{"", `{"metadata":{"namespace":"ns","name":"c","uid":"u1"},"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"d","pool":"p","device":"x"}]}}}}`},
		[2]string{"404", notFound},
		[2]string{"", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","uid":"node-uid"},"spec":{"podCIDR":"198.18.0.0/24"}}`},
		[2]string{"", `{"metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"s1"},"spec":{"driver":"d","pool":{"name":"n","generation":1,"resourceSliceCount":1}}}]}`},
		[2]string{"", `{"metadata":{"name":"s2","resourceVersion":"8"},"spec":{"driver":"d","pool":{"name":"n","generation":1,"resourceSliceCount":1}}}`},
		[2]string{"409", `{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"Conflict","code":409}`},
		[2]string{"", `{"apiVersion":"v1","kind":"Status","status":"Success"}`},
	)
	claim, err := c.GetClaim(ctx, "ns", "c")
	require.NoError(t, err)
	require.Equal(t, "u1", string(claim.UID))
	require.Equal(t, "x", claim.Status.Allocation.Devices.Results[0].Device)
	_, err = c.GetClaim(ctx, "ns", "x")
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	uid, err := c.NodeUID(ctx, "n")
	require.NoError(t, err)
	require.Equal(t, "node-uid", string(uid))
	list, err := c.ListSlices(ctx, SliceSelector("d", "n"))
	require.NoError(t, err)
	require.Equal(t, "7", list.ResourceVersion)
	require.Equal(t, "s1", list.Items[0].Name)
	s := &ResourceSlice{ObjectMeta: metav1.ObjectMeta{GenerateName: "00000-d-n-"}, Spec: ResourceSliceSpec{Driver: "d", NodeName: ptr.To("n"),
		Pool: ResourcePool{Name: "n", Generation: 1, ResourceSliceCount: 1}}}
	got, err := c.CreateSlice(ctx, s)
	require.NoError(t, err)
	require.Equal(t, "s2", got.Name)
	s.Name, s.ResourceVersion = "s2", "3"
	_, err = c.UpdateSlice(ctx, s)
	require.True(t, apierrors.IsConflict(err), "%v", err)
	require.NoError(t, c.DeleteSlice(ctx, "s2", "slice-uid"))

	r := *seen
	require.Len(t, r, 7)
	require.Equal(t, request{method: "GET", path: "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"}, r[0])
	require.Equal(t, "/api/v1/nodes/n", r[2].path)
	require.Equal(t, "GET", r[3].method)
	require.Equal(t, "/apis/resource.k8s.io/v1/resourceslices", r[3].path)
	require.Equal(t, "fieldSelector=spec.driver%3Dd%2Cspec.nodeName%3Dn", r[3].query)
	require.Equal(t, "POST", r[4].method)
	require.Equal(t, "application/json", r[4].contentType)
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(r[4].body), &body))
	require.Equal(t, "resource.k8s.io/v1", body["apiVersion"])
	require.Equal(t, "ResourceSlice", body["kind"])
	require.Equal(t, "PUT", r[5].method)
	require.Equal(t, "/apis/resource.k8s.io/v1/resourceslices/s2", r[5].path)
	require.Contains(t, r[5].body, `"resourceVersion":"3"`)
	require.Equal(t, "DELETE", r[6].method)
	require.Equal(t, "/apis/resource.k8s.io/v1/resourceslices/s2", r[6].path)
	require.Contains(t, r[6].body, `"preconditions":{"uid":"slice-uid"}`)
}

// A watch's events reach fn in order, an ERROR event with its status,
// and the end of the stream ends the watch without an error; a stream
// that breaks mid-event is an error naming the watch.
func TestClientWatch(t *testing.T) {
	events := strings.Join([]string{
		`{"type":"ADDED","object":{"metadata":{"name":"s1","resourceVersion":"5"},"spec":{"driver":"d","pool":{"name":"n","generation":1,"resourceSliceCount":1}}}}`,
		`{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"6"}}}`,
		`{"type":"ERROR","object":{"apiVersion":"v1","kind":"Status","status":"Failure","code":410,"reason":"Expired"}}`,
	}, "\n")
	c, seen := stubServer(t, [2]string{"", events}, [2]string{"", `{"type":"ADDED","object":{"metadata":`})
	var got []string
	err := c.WatchSlices(context.Background(), SliceSelector("d", "n"), "4", func(ev SliceEvent) {
		switch ev.Type {
		case "ERROR":
			got = append(got, ev.Type+" "+string(rune('0'+ev.Status.Code/100)))
		default:
			got = append(got, ev.Type+" "+ev.Slice.Name+" "+ev.Slice.ResourceVersion)
		}
	})
	require.NoError(t, err)
	require.Equal(t, []string{"ADDED s1 5", "BOOKMARK  6", "ERROR 4"}, got)
	q := (*seen)[0].query
	for _, p := range []string{"watch=true", "resourceVersion=4", "allowWatchBookmarks=true", "fieldSelector=spec.driver%3Dd%2Cspec.nodeName%3Dn"} {
		require.Contains(t, q, p)
	}
	err = c.WatchSlices(context.Background(), SliceSelector("d", "n"), "4", func(SliceEvent) {})
	require.ErrorContains(t, err, "slice watch")
}
