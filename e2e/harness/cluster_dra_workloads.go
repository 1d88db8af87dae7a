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

// ProbePodSpec is a bare pod in namespace default (label app=Name) whose
// one container, "app", probes Paths and then waits: its output is
// ProbeScript's.
type ProbePodSpec struct {
	Name  string
	Paths []string
	// Resource, when set, is requested once in resources.limits.
	Resource string
	// Claim, when set, is the pod's one resource claim, which the
	// container uses.
	Claim *ClaimRef
	// Annotations are the pod's own annotations.
	Annotations map[string]string
	// HostDir, when set, is a host directory bind-mounted at Mount, as a
	// hostPath volume.
	HostDir, Mount string
	// Root runs the container as uid 0 (default: uid and gid 1000, non-root).
	Root bool
}

// ProbePod is the manifest of s.
func ProbePod(s ProbePodSpec) string {
	meta := map[string]any{"name": s.Name, "namespace": "default", "labels": map[string]any{"app": s.Name}}
	if len(s.Annotations) > 0 {
		meta["annotations"] = s.Annotations
	}
	ctr := map[string]any{
		"name":            "app",
		"image":           BusyboxImage,
		"imagePullPolicy": "Never",
		"command":         []any{"/bin/sh", "-c", ProbeAndWait(s.Paths...)},
	}
	spec := map[string]any{
		"automountServiceAccountToken":  false,
		"enableServiceLinks":            false,
		"terminationGracePeriodSeconds": 2,
		"securityContext":               map[string]any{"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": true},
		"containers":                    []any{ctr},
	}
	if s.Root {
		spec["securityContext"] = map[string]any{"runAsUser": 0, "runAsGroup": 0}
	}
	if s.Claim != nil {
		claim := map[string]any{"name": "gpu"}
		if s.Claim.Template != "" {
			claim["resourceClaimTemplateName"] = s.Claim.Template
		} else {
			claim["resourceClaimName"] = s.Claim.Claim
		}
		spec["resourceClaims"] = []any{claim}
		ctr["resources"] = map[string]any{"claims": []any{map[string]any{"name": "gpu"}}}
	}
	if s.Resource != "" {
		ctr["resources"] = map[string]any{"limits": map[string]any{s.Resource: "1"}}
	}
	if s.HostDir != "" {
		spec["volumes"] = []any{map[string]any{"name": "host", "hostPath": map[string]any{"path": s.HostDir, "type": "Directory"}}}
		ctr["volumeMounts"] = []any{map[string]any{"name": "host", "mountPath": s.Mount}}
	}
	out, _ := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
	return string(out)
}

// ClaimPod is a ProbePod (uid 1000) whose one container uses the claim.
func ClaimPod(name string, ref ClaimRef, paths ...string) string {
	return ProbePod(ProbePodSpec{Name: name, Paths: paths, Claim: &ref})
}

// AnnotatedPod is a ProbePod (uid 1000) that asks for nothing but names
// CDI devices in a cdi.k8s.io annotation, as a pod author can.
func AnnotatedPod(name, cdiDevices string, paths ...string) string {
	return ProbePod(ProbePodSpec{Name: name, Paths: paths, Annotations: map[string]string{"cdi.k8s.io/forged": cdiDevices}})
}
