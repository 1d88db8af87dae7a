package harness

import (
	"fmt"

	"sigs.k8s.io/yaml"
)

// The soak's GPU workloads (soak.go): bare pods in namespace default,
// each labelled soak=<workload> and app=<pod>, whose container "app"
// lists its /dev/dri and sleeps, or, for the restart kind, exits after a
// few seconds so the kubelet restarts it with the allocation it cached.

// Workload kinds of the soak.
const (
	// SoakSingle asks for one card.
	SoakSingle = "single"
	// SoakMulti asks for two cards.
	SoakMulti = "multi"
	// SoakInit has an init container that asks for a card, then an app
	// container that asks for one.
	SoakInit = "init"
	// SoakRestart's container exits every few seconds.
	SoakRestart = "restart"
	// SoakShared is two pods that share one ResourceClaim (DRA only).
	SoakShared = "shared"
)

// Soak modes: how the node serves its cards.
const (
	SoakDevicePlugin = "device-plugin"
	SoakDRA          = "dra"
)

// Claim templates the DRA workloads use; SoakTemplates creates them.
const (
	soakOneCard  = "soak-one-card"
	soakTwoCards = "soak-two-cards"
)

// SoakTemplates are the ResourceClaimTemplates of the DRA workloads.
func SoakTemplates() []string {
	var out []string
	for name, count := range map[string]int{soakOneCard: 1, soakTwoCards: 2} {
		b, _ := yaml.Marshal(map[string]any{
			"apiVersion": "resource.k8s.io/v1",
			"kind":       "ResourceClaimTemplate",
			"metadata":   map[string]any{"name": name, "namespace": "default"},
			"spec":       map[string]any{"spec": countClaimSpec(count)},
		})
		out = append(out, string(b))
	}
	return out
}

func countClaimSpec(count int) map[string]any {
	return map[string]any{"devices": map[string]any{"requests": []any{
		map[string]any{"name": "gpu", "exactly": map[string]any{
			"deviceClassName": DRAClass, "allocationMode": "ExactCount", "count": count,
		}},
	}}}
}

// soakWorkload is the manifests of one workload, in the order to apply
// them, and the names of its pods.
type soakWorkload struct {
	name, kind string
	manifests  []string
	pods       []string
	// claim is the shared ResourceClaim ("" when none).
	claim string
}

// newSoakWorkload builds workload name of kind for mode; resource is the
// device plugin's resource name.
func newSoakWorkload(mode, kind, name, resource string) (*soakWorkload, error) {
	w := &soakWorkload{name: name, kind: kind}
	cards := 1
	if kind == SoakMulti {
		cards = 2
	}
	switch {
	case kind == SoakShared && mode == SoakDRA:
		w.claim = name
		b, _ := yaml.Marshal(map[string]any{
			"apiVersion": "resource.k8s.io/v1",
			"kind":       "ResourceClaim",
			"metadata":   map[string]any{"name": name, "namespace": "default", "labels": map[string]any{"soak": name}},
			"spec":       countClaimSpec(1),
		})
		w.manifests = append(w.manifests, string(b))
		for _, p := range []string{name + "-a", name + "-b"} {
			w.pods = append(w.pods, p)
			w.manifests = append(w.manifests, soakPod(mode, kind, name, p, resource, cards, map[string]any{"name": "gpu", "resourceClaimName": name}))
		}
	case kind == SoakShared:
		return nil, fmt.Errorf("soak workload %s: kind %s needs the DRA mode", name, kind)
	case kind == SoakSingle || kind == SoakMulti || kind == SoakInit || kind == SoakRestart:
		template := soakOneCard
		if cards == 2 {
			template = soakTwoCards
		}
		w.pods = []string{name}
		w.manifests = []string{soakPod(mode, kind, name, name, resource, cards, map[string]any{"name": "gpu", "resourceClaimTemplateName": template})}
	default:
		return nil, fmt.Errorf("soak workload %s: unknown kind %q", name, kind)
	}
	return w, nil
}

// soakPod is one pod of a workload: on the device-plugin node it asks
// for cards of resource, on the DRA node it uses claim.
func soakPod(mode, kind, workload, name, resource string, cards int, claim map[string]any) string {
	script := "ls -ln /dev/dri 2>&1; exec sleep 3600"
	if kind == SoakRestart {
		script = "ls -ln /dev/dri 2>&1; sleep 4; exit 1"
	}
	container := func(name, script string) map[string]any {
		c := map[string]any{
			"name":            name,
			"image":           BusyboxImage,
			"imagePullPolicy": "Never",
			"command":         []any{"/bin/sh", "-c", script},
		}
		if mode == SoakDRA {
			c["resources"] = map[string]any{"claims": []any{map[string]any{"name": "gpu"}}}
		} else {
			c["resources"] = map[string]any{"limits": map[string]any{resource: fmt.Sprint(cards)}}
		}
		return c
	}
	spec := map[string]any{
		"automountServiceAccountToken":  false,
		"enableServiceLinks":            false,
		"dnsPolicy":                     "Default",
		"terminationGracePeriodSeconds": 1,
		"securityContext":               map[string]any{"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": true},
		"containers":                    []any{container("app", script)},
	}
	if kind == SoakInit {
		spec["initContainers"] = []any{container("init", "ls -ln /dev/dri 2>&1; sleep 1")}
	}
	if mode == SoakDRA {
		spec["resourceClaims"] = []any{claim}
	}
	b, _ := yaml.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"name": name, "namespace": "default", "labels": map[string]any{"soak": workload, "app": name}},
		"spec":       spec,
	})
	return string(b)
}
