package draapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// Client reads claims and Nodes and writes the node's slices. Requests
// and answers are JSON; errors are the API server's (apierrors.IsNotFound
// and the like work on them).
type Client struct {
	resource *rest.RESTClient
	core     *rest.RESTClient
}

// NewClient builds a client from cfg (kubeconfig or in-cluster), keeping
// its host, credentials, TLS, user agent and rate limits.
func NewClient(cfg *rest.Config) (*Client, error) {
	// A scheme that knows only metav1.Status, so that the REST client
	// turns an error answer into an *apierrors.StatusError.
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(scheme).WithoutConversion()
	build := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion, c.APIPath, c.NegotiatedSerializer = &gv, apiPath, codecs
		c.ContentType, c.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
		return rest.RESTClientFor(c)
	}
	res, err := build(schema.GroupVersion{Group: Group, Version: Version}, "/apis")
	if err != nil {
		return nil, fmt.Errorf("%s client: %w", Group, err)
	}
	core, err := build(schema.GroupVersion{Version: "v1"}, "/api")
	if err != nil {
		return nil, fmt.Errorf("core client: %w", err)
	}
	return &Client{resource: res, core: core}, nil
}

func decode(b []byte, err error, what string, into any) error {
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	return nil
}

// GetClaim reads the claim namespace/name, from etcd (a quorum read: the
// latest allocation).
func (c *Client) GetClaim(ctx context.Context, namespace, name string) (*ResourceClaim, error) {
	var out ResourceClaim
	b, err := c.resource.Get().Namespace(namespace).Resource("resourceclaims").Name(name).Do(ctx).Raw()
	return &out, decode(b, err, "ResourceClaim "+namespace+"/"+name, &out)
}

// NodeUID is the UID of the Node name (its metadata only).
func (c *Client) NodeUID(ctx context.Context, name string) (types.UID, error) {
	var out metav1.PartialObjectMetadata
	b, err := c.core.Get().Resource("nodes").Name(name).Do(ctx).Raw()
	if err := decode(b, err, "Node "+name, &out); err != nil {
		return "", err
	}
	return out.UID, nil
}

// SliceSelector selects the slices of driver for node.
func SliceSelector(driver, node string) string {
	return fields.Set{ResourceSliceSelectorDriver: driver, ResourceSliceSelectorNodeName: node}.String()
}

// ListSlices lists the slices the field selector selects.
func (c *Client) ListSlices(ctx context.Context, selector string) (*ResourceSliceList, error) {
	var out ResourceSliceList
	b, err := c.resource.Get().Resource("resourceslices").Param("fieldSelector", selector).Do(ctx).Raw()
	return &out, decode(b, err, "ResourceSliceList", &out)
}

// CreateSlice creates s and returns it as stored.
func (c *Client) CreateSlice(ctx context.Context, s *ResourceSlice) (*ResourceSlice, error) {
	return c.writeSlice(ctx, c.resource.Post().Resource("resourceslices"), s)
}

// UpdateSlice replaces the slice s names, if its resourceVersion is
// still s's (a conflict error otherwise).
func (c *Client) UpdateSlice(ctx context.Context, s *ResourceSlice) (*ResourceSlice, error) {
	return c.writeSlice(ctx, c.resource.Put().Resource("resourceslices").Name(s.Name), s)
}

func (c *Client) writeSlice(ctx context.Context, r *rest.Request, s *ResourceSlice) (*ResourceSlice, error) {
	in := *s
	in.APIVersion, in.Kind = Group+"/"+Version, "ResourceSlice"
	body, err := json.Marshal(&in)
	if err != nil {
		return nil, fmt.Errorf("encode ResourceSlice %s: %w", s.Name, err)
	}
	var out ResourceSlice
	b, err := r.SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body).Do(ctx).Raw()
	return &out, decode(b, err, "ResourceSlice", &out)
}

// DeleteSlice deletes the slice name if its UID is still uid.
func (c *Client) DeleteSlice(ctx context.Context, name string, uid types.UID) error {
	body, err := json.Marshal(metav1.DeleteOptions{
		TypeMeta:      metav1.TypeMeta{APIVersion: "v1", Kind: "DeleteOptions"},
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil {
		return err
	}
	return c.resource.Delete().Resource("resourceslices").Name(name).
		SetHeader("Content-Type", runtime.ContentTypeJSON).Body(body).Do(ctx).Error()
}

// SliceEvent is one event of a slice watch.
type SliceEvent struct {
	// Type is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.
	Type string
	// Slice is the object of the event; for ERROR, Status is set instead.
	Slice  ResourceSlice
	Status *metav1.Status
}

// WatchSlices watches the slices the selector selects from
// resourceVersion on, calling fn for each event until ctx ends, the
// server ends the watch (nil) or the stream breaks (its error).
func (c *Client) WatchSlices(ctx context.Context, selector, resourceVersion string, fn func(SliceEvent)) error {
	stream, err := c.resource.Get().Resource("resourceslices").Param("fieldSelector", selector).
		Param("watch", "true").Param("resourceVersion", resourceVersion).Param("allowWatchBookmarks", "true").
		Timeout(0).Stream(ctx)
	if err != nil {
		return err
	}
	defer stream.Close()
	dec := json.NewDecoder(bufio.NewReader(stream))
	for {
		var ev struct {
			Type   string          `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slice watch: %w", err)
		}
		out := SliceEvent{Type: ev.Type}
		if ev.Type == "ERROR" {
			out.Status = &metav1.Status{}
			err = json.Unmarshal(ev.Object, out.Status)
		} else {
			err = json.Unmarshal(ev.Object, &out.Slice)
		}
		if err != nil {
			return fmt.Errorf("slice watch: decode a %s event: %w", ev.Type, err)
		}
		fn(out)
	}
}
