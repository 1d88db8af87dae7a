package harness

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// DRA on the control plane. Kubernetes 1.37 serves resource.k8s.io/v1 by
// default, and DynamicResourceAllocation and DRAExtendedResource are GA
// and locked on (pkg/features/kube_features.go of v1.37.2), so the
// cluster needs no flag for DRA. RequireDRA checks that against the
// running binaries instead of assuming it.

// draKinds are the resource.k8s.io/v1 resources the DRA scenarios use.
var draKinds = []string{"deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"}

// draGates are the feature gates the DRA scenarios need on in the API
// server (extended resources also need them in the scheduler and kubelet,
// the same release with the same defaults; the scenarios exercise those).
var draGates = []string{"DynamicResourceAllocation", "DRAExtendedResource"}

// RequireDRA returns an error unless the API server serves every resource
// of draKinds in resource.k8s.io/v1 and reports every gate of draGates
// enabled in its kubernetes_feature_enabled metric.
func (c *Cluster) RequireDRA(ctx context.Context) error {
	out, err := c.Kubectl(ctx, "api-resources", "--api-group=resource.k8s.io", "-o", "name")
	if err != nil {
		return fmt.Errorf("list resource.k8s.io resources: %w", err)
	}
	served := map[string]bool{}
	for _, l := range strings.Fields(out) {
		served[l] = true
	}
	for _, k := range draKinds {
		if !served[k+".resource.k8s.io"] {
			return fmt.Errorf("the API server does not serve %s.resource.k8s.io (serves %q)", k, out)
		}
	}
	if _, err := c.Kubectl(ctx, "get", "--raw", "/apis/resource.k8s.io/v1"); err != nil {
		return fmt.Errorf("resource.k8s.io/v1 not served: %w", err)
	}
	metrics, err := c.Kubectl(ctx, "get", "--raw", "/metrics")
	if err != nil {
		return fmt.Errorf("API server metrics: %w", err)
	}
	for _, g := range draGates {
		re := regexp.MustCompile(`(?m)^kubernetes_feature_enabled\{name="` + g + `",stage="[A-Z]*"\} 1$`)
		if !re.MatchString(metrics) {
			return fmt.Errorf("feature gate %s is not enabled in the API server", g)
		}
	}
	return nil
}

// LabelNode sets (value non-empty) or removes (value "") a label of the
// cluster's single node.
func (c *Cluster) LabelNode(ctx context.Context, key, value string) error {
	return c.LabelNodeNamed(ctx, NodeName, key, value)
}

// LabelNodeNamed sets (value non-empty) or removes (value "") a label of
// node name.
func (c *Cluster) LabelNodeNamed(ctx context.Context, name, key, value string) error {
	arg := key + "=" + value
	if value == "" {
		arg = key + "-"
	}
	_, err := c.Kubectl(ctx, "label", "node", name, arg, "--overwrite")
	return err
}

// SliceDevice is one device of a ResourceSlice, with its attributes as
// strings (the string, int or bool value the slice holds).
type SliceDevice struct {
	Name       string
	Attributes map[string]string
	Taints     []string
	// AllowMultipleAllocations is the device's field as the API server
	// stored it; Capacity its capacities' values, by name.
	AllowMultipleAllocations bool
	Capacity                 map[string]string
}

// ResourceSliceDevices returns the devices driver publishes for the
// cluster's single node, across its slices, by device name.
func (c *Cluster) ResourceSliceDevices(ctx context.Context, driver string) (map[string]SliceDevice, error) {
	return c.ResourceSliceDevicesOf(ctx, driver, NodeName)
}

// ResourceSliceDevicesOf returns the devices driver publishes for node,
// across its slices, by device name.
func (c *Cluster) ResourceSliceDevicesOf(ctx context.Context, driver, node string) (map[string]SliceDevice, error) {
	var list struct {
		Items []struct {
			Spec struct {
				Driver   string `json:"driver"`
				NodeName string `json:"nodeName"`
				Pool     struct {
					Name string `json:"name"`
				} `json:"pool"`
				Devices []struct {
					Name       string `json:"name"`
					Attributes map[string]struct {
						String  *string `json:"string"`
						Int     *int64  `json:"int"`
						Bool    *bool   `json:"bool"`
						Version *string `json:"version"`
					} `json:"attributes"`
					Taints []struct {
						Key    string `json:"key"`
						Effect string `json:"effect"`
					} `json:"taints"`
					AllowMultipleAllocations *bool `json:"allowMultipleAllocations"`
					Capacity                 map[string]struct {
						Value string `json:"value"`
					} `json:"capacity"`
				} `json:"devices"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := c.GetJSON(ctx, &list, "resourceslices"); err != nil {
		return nil, err
	}
	out := map[string]SliceDevice{}
	for _, s := range list.Items {
		if s.Spec.Driver != driver || s.Spec.NodeName != node {
			continue
		}
		for _, d := range s.Spec.Devices {
			sd := SliceDevice{Name: d.Name, Attributes: map[string]string{}, Capacity: map[string]string{},
				AllowMultipleAllocations: d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations}
			for k, v := range d.Capacity {
				sd.Capacity[k] = v.Value
			}
			for k, v := range d.Attributes {
				switch {
				case v.String != nil:
					sd.Attributes[k] = *v.String
				case v.Int != nil:
					sd.Attributes[k] = fmt.Sprint(*v.Int)
				case v.Bool != nil:
					sd.Attributes[k] = fmt.Sprint(*v.Bool)
				case v.Version != nil:
					sd.Attributes[k] = *v.Version
				}
			}
			for _, t := range d.Taints {
				sd.Taints = append(sd.Taints, t.Key+":"+t.Effect)
			}
			out[d.Name] = sd
		}
	}
	return out, nil
}

// Claim is the part of a ResourceClaim the scenarios check.
type Claim struct {
	Metadata struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
	} `json:"metadata"`
	Status struct {
		Allocation *struct {
			Devices struct {
				Results []struct {
					Request string `json:"request"`
					Driver  string `json:"driver"`
					Pool    string `json:"pool"`
					Device  string `json:"device"`
					// ShareID and ConsumedCapacity are set for a share
					// of a shared device.
					ShareID          string            `json:"shareID"`
					ConsumedCapacity map[string]string `json:"consumedCapacity"`
				} `json:"results"`
			} `json:"devices"`
		} `json:"allocation"`
		ReservedFor []struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"reservedFor"`
	} `json:"status"`
}

// Devices returns the allocated device names ("" when unallocated).
func (cl *Claim) Devices() []string {
	if cl.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, r := range cl.Status.Allocation.Devices.Results {
		out = append(out, r.Device)
	}
	return out
}

// Claims lists the ResourceClaims of namespace ns.
func (c *Cluster) Claims(ctx context.Context, ns string) ([]Claim, error) {
	var list struct {
		Items []Claim `json:"items"`
	}
	if err := c.GetJSON(ctx, &list, "resourceclaims", "-n", ns); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// PodClaimNames returns the names of the ResourceClaims the pod uses:
// status.resourceClaimStatuses (claims made from templates) and
// status.extendedResourceClaimStatus (the claim the scheduler made for
// extended resources).
func (c *Cluster) PodClaimNames(ctx context.Context, ns, pod string) ([]string, error) {
	var p struct {
		Status struct {
			ResourceClaimStatuses []struct {
				ResourceClaimName *string `json:"resourceClaimName"`
			} `json:"resourceClaimStatuses"`
			ExtendedResourceClaimStatus *struct {
				ResourceClaimName string `json:"resourceClaimName"`
			} `json:"extendedResourceClaimStatus"`
		} `json:"status"`
	}
	if err := c.GetJSON(ctx, &p, "pod", pod, "-n", ns); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			out = append(out, *s.ResourceClaimName)
		}
	}
	if e := p.Status.ExtendedResourceClaimStatus; e != nil {
		out = append(out, e.ResourceClaimName)
	}
	return out, nil
}
