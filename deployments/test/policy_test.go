package test

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

const policyDir = "../policy"

// daemonSets returns every DaemonSet of the renderings that deploy with
// the default host paths (helm-custom moves them on purpose): the
// device-plugin variants, the DRA ones and the per-node variants example.
func daemonSets(t *testing.T) []*appsv1.DaemonSet {
	t.Helper()
	var out []*appsv1.DaemonSet
	for name, r := range renderAll(t) {
		if name == "helm-custom" {
			continue
		}
		out = append(out, r.daemonSet(t))
	}
	for _, r := range renderDRA(t) {
		out = append(out, r.devicePlugin, r.dra)
	}
	for _, o := range mustRender(t, "per-node-delivery", kustomize("examples/per-node-delivery")).objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			out = append(out, ds)
		}
	}
	return out
}

// yamlDocs splits a file into its YAML documents.
func yamlDocs(t *testing.T, file string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	return bytes.Split(raw, []byte("\n---\n"))
}

// namespacedHead is the type and name of a namespaced object the
// recipes ship, embedded in the structs they are decoded strictly into.
type namespacedHead struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// kyvernoException is a kyverno.io/v2 PolicyException, the fields the
// recipe uses; decoded strictly.
type kyvernoException struct {
	namespacedHead
	Spec struct {
		Background bool `json:"background"`
		Exceptions []struct {
			PolicyName string   `json:"policyName"`
			RuleNames  []string `json:"ruleNames"`
		} `json:"exceptions"`
		Match struct {
			Any []struct {
				Resources struct {
					Kinds      []string `json:"kinds"`
					Namespaces []string `json:"namespaces"`
					Names      []string `json:"names"`
				} `json:"resources"`
			} `json:"any"`
		} `json:"match"`
	} `json:"spec"`
}

// celException is a policies.kyverno.io/v1 PolicyException.
type celException struct {
	namespacedHead
	Spec struct {
		PolicyRefs []struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"policyRefs"`
		MatchConditions []struct {
			Name       string `json:"name"`
			Expression string `json:"expression"`
		} `json:"matchConditions"`
	} `json:"spec"`
}

// TestKyvernoException checks that the exceptions name exactly the
// DaemonSets every rendering deploys, their pods and their namespace, and
// that both kinds cover the same policies. The cluster e2e applies them
// against Kyverno's CRDs and runs Kyverno's CLI on them.
func TestKyvernoException(t *testing.T) {
	v2, cel := loadExceptions(t, "kyverno-policyexception.yaml")

	dsNames := map[string]bool{}
	for _, ds := range daemonSets(t) {
		require.Equal(t, ReleaseNamespace, ds.Namespace)
		dsNames[ds.Name] = true
	}
	var podPatterns []string
	listed := map[string]bool{}
	for _, m := range v2.Spec.Match.Any {
		r := m.Resources
		require.Equal(t, []string{ReleaseNamespace}, r.Namespaces, "every match is limited to the dri-cdi namespace")
		require.Len(t, r.Kinds, 1)
		switch r.Kinds[0] {
		case "DaemonSet":
			for _, n := range r.Names {
				require.NotContains(t, n, "*", "DaemonSets are named exactly")
				listed[n] = true
			}
		case "Pod":
			podPatterns = append(podPatterns, r.Names...)
		default:
			t.Fatalf("the exception matches kind %s", r.Kinds[0])
		}
	}
	require.Equal(t, dsNames, listed, "the exception names exactly the DaemonSets the manifests deploy")
	for ds := range dsNames {
		pod := ds + "-x7k2p"
		matched := false
		for _, p := range podPatterns {
			ok, err := path.Match(p, pod)
			require.NoError(t, err)
			matched = matched || ok
		}
		require.True(t, matched, "the exception's pod names %v match %s's pods (%s)", podPatterns, ds, pod)
	}

	// The same policies in both kinds; every ClusterPolicy rule also in
	// its autogen form (Kyverno checks the DaemonSet by it).
	v2Policies, celPolicies := exceptedPolicies(t, v2, cel)
	require.Equal(t, v2Policies, celPolicies)
	require.Len(t, cel.Spec.MatchConditions, 1)
	expr := cel.Spec.MatchConditions[0].Expression
	require.Contains(t, expr, "object.metadata.namespace == '"+ReleaseNamespace+"'")
	names := strings.Replace(expr, "object.metadata.namespace == '"+ReleaseNamespace+"'", "", 1)
	for ds := range dsNames {
		require.Equal(t, 2, strings.Count(names, "'"+ds+"'"), "the CEL exception names DaemonSet %s, as the DaemonSet and as its pods' owner", ds)
	}
}

// gatekeeperConstraint is a constraint of the gatekeeper-library kinds
// the recipe uses.
type gatekeeperConstraint struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		EnforcementAction string `json:"enforcementAction"`
		Match             struct {
			Kinds []struct {
				APIGroups []string `json:"apiGroups"`
				Kinds     []string `json:"kinds"`
			} `json:"kinds"`
			Namespaces []string `json:"namespaces"`
		} `json:"match"`
		Parameters struct {
			AllowedHostPaths []struct {
				PathPrefix string `json:"pathPrefix"`
				ReadOnly   bool   `json:"readOnly"`
			} `json:"allowedHostPaths"`
			Volumes []string `json:"volumes"`
		} `json:"parameters"`
	} `json:"spec"`
}

// TestGatekeeperConstraints checks that the constraints admit exactly the
// host paths the manifests mount, read-only wherever no container of any
// rendering writes, and only the volume types they use. A grant added to
// a DaemonSet fails here until the constraint has its row.
func TestGatekeeperConstraints(t *testing.T) {
	want := map[string]bool{} // host path -> read-only everywhere
	volumeTypes := map[string]bool{}
	for _, ds := range daemonSets(t) {
		spec := ds.Spec.Template.Spec
		for _, v := range spec.Volumes {
			switch {
			case v.HostPath != nil:
				volumeTypes["hostPath"] = true
			case v.ConfigMap != nil:
				volumeTypes["configMap"] = true
			}
		}
		for _, mounts := range hostMounts(t, spec) {
			for p, m := range mounts {
				ro, seen := want[p]
				want[p] = m.readOnly && (ro || !seen)
			}
		}
	}
	// The optional /dev/kfd (components/amdgpu-kfd, devices.kfd).
	require.Contains(t, want, "/dev/kfd", "a rendering with /dev/kfd is among the checked ones")
	// devices.companionPaths are the user's own: a user who sets them adds
	// them to the constraint (deployments/README.md says so).
	for _, p := range variants["helm-companions"].companionPaths {
		require.Contains(t, want, p)
		delete(want, p)
	}

	docs := yamlDocs(t, filepath.Join(policyDir, "gatekeeper-constraints.yaml"))
	got := map[string]bool{}
	var volumes []string
	for _, d := range docs {
		var c gatekeeperConstraint
		require.NoError(t, yaml.UnmarshalStrict(d, &c))
		require.Equal(t, "constraints.gatekeeper.sh/v1beta1", c.APIVersion)
		require.Equal(t, "deny", c.Spec.EnforcementAction, c.Metadata.Name)
		require.Equal(t, []string{ReleaseNamespace}, c.Spec.Match.Namespaces, "%s checks the dri-cdi namespace only", c.Metadata.Name)
		switch c.Kind {
		case "K8sPSPHostFilesystem":
			for _, a := range c.Spec.Parameters.AllowedHostPaths {
				require.NotContains(t, got, a.PathPrefix, "listed twice")
				got[a.PathPrefix] = a.ReadOnly
			}
		case "K8sPSPVolumeTypes":
			volumes = c.Spec.Parameters.Volumes
		default:
			t.Fatalf("unexpected constraint kind %s", c.Kind)
		}
	}
	require.Equal(t, want, got, "allowedHostPaths: every host path the manifests mount, read-only unless a container writes it")
	var wantVolumes []string
	for v := range volumeTypes {
		wantVolumes = append(wantVolumes, v)
	}
	sort.Strings(wantVolumes)
	sort.Strings(volumes)
	require.Equal(t, wantVolumes, volumes)
}

// TestDoctorReaderRole: the Role for the served doctor reports grants
// reading pods and proxying to them, in the dri-cdi namespace, and
// nothing else.
func TestDoctorReaderRole(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(policyDir, "doctor-reader-role.yaml"))
	require.NoError(t, err)
	objs, err := Decode(raw)
	require.NoError(t, err)
	role := only[*rbacv1.Role](t, objs, "Role")
	binding := only[*rbacv1.RoleBinding](t, objs, "RoleBinding")
	require.Equal(t, ReleaseNamespace, role.Namespace)
	require.Equal(t, ReleaseNamespace, binding.Namespace)
	require.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"pods/proxy"}, Verbs: []string{"get"}},
	}, role.Rules)
	require.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}, binding.RoleRef)
}

// loadExceptions strictly decodes a file of policyDir holding the two
// kinds of PolicyException, the kyverno.io/v2 one and the
// policies.kyverno.io/v1 one, in that order.
func loadExceptions(t *testing.T, file string) (kyvernoException, celException) {
	t.Helper()
	docs := yamlDocs(t, filepath.Join(policyDir, file))
	require.Len(t, docs, 2)
	var v2 kyvernoException
	require.NoError(t, yaml.UnmarshalStrict(docs[0], &v2))
	require.Equal(t, "kyverno.io/v2", v2.APIVersion)
	require.Equal(t, "PolicyException", v2.Kind)
	var cel celException
	require.NoError(t, yaml.UnmarshalStrict(docs[1], &cel))
	require.Equal(t, "policies.kyverno.io/v1", cel.APIVersion)
	require.Equal(t, "PolicyException", cel.Kind)
	return v2, cel
}

// exceptedPolicies returns, sorted, the policies each kind of exception
// names, after checking that every ClusterPolicy rule is also there in its
// autogen form (Kyverno checks the DaemonSet by it) and that the CEL kind
// refers to ValidatingPolicies.
func exceptedPolicies(t *testing.T, v2 kyvernoException, cel celException) (v2Policies, celPolicies []string) {
	t.Helper()
	for _, e := range v2.Spec.Exceptions {
		v2Policies = append(v2Policies, e.PolicyName)
		for _, r := range e.RuleNames {
			if !strings.HasPrefix(r, "autogen-") {
				require.Contains(t, e.RuleNames, "autogen-"+r, e.PolicyName)
			}
		}
	}
	for _, r := range cel.Spec.PolicyRefs {
		require.Equal(t, "ValidatingPolicy", r.Kind)
		celPolicies = append(celPolicies, r.Name)
	}
	sort.Strings(v2Policies)
	sort.Strings(celPolicies)
	return v2Policies, celPolicies
}

// TestKyvernoUsageException checks the exception for the agent with
// usage on: exactly the policies usage's grants trip, in
// both kinds and every rule in its autogen form too, for exactly the two
// DaemonSets that run the scans (the device plugin's and the DRA
// plugin's), in the dri-cdi namespace. The cluster e2e runs Kyverno's CLI
// on a usage rendering with and without it.
func TestKyvernoUsageException(t *testing.T) {
	v2, cel := loadExceptions(t, "kyverno-policyexception-usage.yaml")

	want := []string{"disallow-capabilities", "disallow-capabilities-strict", "restrict-apparmor-profiles"}
	v2Policies, celPolicies := exceptedPolicies(t, v2, cel)
	require.Equal(t, want, v2Policies)
	require.Equal(t, want, celPolicies)

	scanners := map[string]bool{"dri-cdi": true, "dri-cdi-dra": true}
	listed := map[string]bool{}
	for _, m := range v2.Spec.Match.Any {
		require.Equal(t, []string{ReleaseNamespace}, m.Resources.Namespaces)
		if m.Resources.Kinds[0] == "DaemonSet" {
			for _, n := range m.Resources.Names {
				listed[n] = true
			}
		}
	}
	require.Equal(t, scanners, listed, "the usage exception names exactly the DaemonSets that scan")
	expr := cel.Spec.MatchConditions[0].Expression
	require.Contains(t, expr, "object.metadata.namespace == '"+ReleaseNamespace+"'")
	expr = strings.Replace(expr, "object.metadata.namespace == '"+ReleaseNamespace+"'", "", 1)
	for ds := range scanners {
		require.Equal(t, 2, strings.Count(expr, "'"+ds+"'"), ds)
	}
	require.NotContains(t, expr, "'dri-cdi-nri'", "the NRI plugin does not scan")
}
