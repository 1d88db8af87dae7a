package test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
)

// perNodeExample is the per-node variants recipe of deployments/README.md.
const perNodeExample = "../kustomize/examples/per-node-delivery"

// TestPerNodeVariants renders the two variants of the per-node recipe
// together, as one `kubectl apply -k`, and checks that no two objects
// share a name, that each node runs exactly one variant, and that each
// variant's selectors and references stay within it.
func TestPerNodeVariants(t *testing.T) {
	raw, err := RenderKustomize(perNodeExample)
	require.NoError(t, err)
	objs, err := Decode(raw)
	require.NoError(t, err)

	ids := map[string]bool{}
	for _, o := range objs {
		m, err := meta.Accessor(o)
		require.NoError(t, err)
		id := fmt.Sprintf("%s %s/%s", o.GetObjectKind().GroupVersionKind().Kind, m.GetNamespace(), m.GetName())
		require.False(t, ids[id], "two objects are %s", id)
		ids[id] = true
	}

	var dss []*appsv1.DaemonSet
	configMaps := map[string]bool{}
	var services []*corev1.Service
	namespaces := 0
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.DaemonSet:
			dss = append(dss, o)
		case *corev1.ConfigMap:
			configMaps[o.Name] = true
		case *corev1.Service:
			services = append(services, o)
		case *corev1.Namespace:
			namespaces++
		}
	}
	require.Equal(t, 1, namespaces, "one namespace for both variants")
	require.Len(t, dss, 2)
	require.Len(t, services, 2)

	byDelivery := map[string]*appsv1.DaemonSet{}
	for _, ds := range dss {
		agent := container(t, ds.Spec.Template.Spec, "agent")
		byDelivery[flags(t, agent.Args)["delivery"]] = ds
		// Each variant mounts its own config.
		for _, v := range ds.Spec.Template.Spec.Volumes {
			if v.ConfigMap != nil {
				require.True(t, configMaps[v.ConfigMap.Name], "%s mounts ConfigMap %s, which is rendered", ds.Name, v.ConfigMap.Name)
			}
		}
	}
	require.Contains(t, byDelivery, "cdi-cri")
	require.Contains(t, byDelivery, "nri")

	// Every node runs exactly one variant, chosen by its label.
	nodes := map[string]map[string]string{
		"unlabelled":     {"kubernetes.io/os": "linux"},
		"labelled nri":   {"kubernetes.io/os": "linux", "dri-cdi.dev/delivery": "nri"},
		"labelled other": {"kubernetes.io/os": "linux", "dri-cdi.dev/delivery": "cdi-cri"},
	}
	want := map[string]string{"unlabelled": "cdi-cri", "labelled nri": "nri", "labelled other": "cdi-cri"}
	for node, lbls := range nodes {
		var runs []string
		for delivery, ds := range byDelivery {
			if schedules(t, ds.Spec.Template.Spec, lbls) {
				runs = append(runs, delivery)
			}
		}
		require.Equal(t, []string{want[node]}, runs, "node %s", node)
	}

	// Selectors stay within their variant: a DaemonSet or Service of one
	// selects none of the other's pods.
	for _, ds := range dss {
		sel, err := metaSelector(ds)
		require.NoError(t, err)
		for _, other := range dss {
			require.Equal(t, ds == other, sel.Matches(labels.Set(other.Spec.Template.Labels)),
				"DaemonSet %s selecting the pods of %s", ds.Name, other.Name)
		}
	}
	for _, svc := range services {
		var selects []string
		for _, ds := range dss {
			if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(ds.Spec.Template.Labels)) {
				selects = append(selects, ds.Name)
			}
		}
		require.Len(t, selects, 1, "Service %s selects the pods of one variant: %v", svc.Name, selects)
	}
}

func metaSelector(ds *appsv1.DaemonSet) (labels.Selector, error) {
	return labels.ValidatedSelectorFromSet(ds.Spec.Selector.MatchLabels)
}

// schedules reports whether a pod with spec may run on a node with these
// labels: its nodeSelector and required node affinity (In, NotIn, Exists,
// DoesNotExist; the terms are ORed, the expressions of a term ANDed).
func schedules(t *testing.T, spec corev1.PodSpec, node map[string]string) bool {
	t.Helper()
	for k, v := range spec.NodeSelector {
		if node[k] != v {
			return false
		}
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil || spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		require.Empty(t, term.MatchFields)
		ok := true
		for _, e := range term.MatchExpressions {
			v, has := node[e.Key]
			switch e.Operator {
			case corev1.NodeSelectorOpIn:
				ok = ok && has && slices.Contains(e.Values, v)
			case corev1.NodeSelectorOpNotIn:
				ok = ok && !(has && slices.Contains(e.Values, v))
			case corev1.NodeSelectorOpExists:
				ok = ok && has
			case corev1.NodeSelectorOpDoesNotExist:
				ok = ok && !has
			default:
				t.Fatalf("operator %s not handled", e.Operator)
			}
		}
		if ok {
			return true
		}
	}
	return false
}
