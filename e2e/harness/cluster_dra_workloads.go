package harness

import (
	"sigs.k8s.io/yaml"
)

// DRA workloads: claims and pods that use them, as a user writes them.

// DRAClass is the DeviceClass of every card dri-cdi publishes
// (deployments/kustomize/overlays/dra/deviceclasses.yaml).
const DRAClass = "gpu.dri-cdi.dev"

func claimSpec(class, cel string) map[string]any {
	exactly := map[string]any{"deviceClassName": class}
	if cel != "" {
		exactly["selectors"] = []any{map[string]any{"cel": map[string]any{"expression": cel}}}
	}
	return map[string]any{"devices": map[string]any{"requests": []any{
		map[string]any{"name": "gpu", "exactly": exactly},
	}}}
}

// ResourceClaimTemplate is a template in namespace default whose claims
// ask for one device of class matching the CEL expression cel ("" for
// none).
func ResourceClaimTemplate(name, class, cel string) string {
	out, _ := yaml.Marshal(map[string]any{
		"apiVersion": "resource.k8s.io/v1",
		"kind":       "ResourceClaimTemplate",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec":       map[string]any{"spec": claimSpec(class, cel)},
	})
	return string(out)
}

// ResourceClaim is a claim in namespace default for one device of class
// matching cel ("" for none), which several pods can share.
func ResourceClaim(name, class, cel string) string {
	out, _ := yaml.Marshal(map[string]any{
		"apiVersion": "resource.k8s.io/v1",
		"kind":       "ResourceClaim",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec":       claimSpec(class, cel),
	})
	return string(out)
}

// ClaimRef names the claim a ClaimPod uses: a template (one claim per pod,
// deleted with it) or a shared claim.
type ClaimRef struct {
	Template, Claim string
}

// ClaimPod is a bare pod in namespace default (label app=name) whose one
// container uses the claim and, as uid 1000, probes every path and then
// waits: its output is ProbeScript's.
func ClaimPod(name string, ref ClaimRef, paths ...string) string {
	claim := map[string]any{"name": "gpu"}
	if ref.Template != "" {
		claim["resourceClaimTemplateName"] = ref.Template
	} else {
		claim["resourceClaimName"] = ref.Claim
	}
	out, _ := yaml.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"name": name, "namespace": "default", "labels": map[string]any{"app": name}},
		"spec": map[string]any{
			"automountServiceAccountToken":  false,
			"enableServiceLinks":            false,
			"terminationGracePeriodSeconds": 2,
			"securityContext":               map[string]any{"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": true},
			"resourceClaims":                []any{claim},
			"containers": []any{map[string]any{
				"name":            "app",
				"image":           BusyboxImage,
				"imagePullPolicy": "Never",
				"command":         []any{"/bin/sh", "-c", ProbeAndWait(paths...)},
				"resources":       map[string]any{"claims": []any{map[string]any{"name": "gpu"}}},
			}},
		},
	})
	return string(out)
}

// AnnotatedPod is a bare pod in namespace default (label app=name) that
// asks for nothing but names CDI devices in a cdi.k8s.io annotation, as a
// pod author can, and probes every path as uid 1000.
func AnnotatedPod(name, cdiDevices string, paths ...string) string {
	out, _ := yaml.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{"name": name, "namespace": "default", "labels": map[string]any{"app": name},
			"annotations": map[string]any{"cdi.k8s.io/forged": cdiDevices}},
		"spec": map[string]any{
			"automountServiceAccountToken":  false,
			"enableServiceLinks":            false,
			"terminationGracePeriodSeconds": 2,
			"securityContext":               map[string]any{"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": true},
			"containers": []any{map[string]any{
				"name":            "app",
				"image":           BusyboxImage,
				"imagePullPolicy": "Never",
				"command":         []any{"/bin/sh", "-c", ProbeAndWait(paths...)},
			}},
		},
	})
	return string(out)
}
