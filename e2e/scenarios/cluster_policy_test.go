package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/dri-cdi/dri-cdi/e2e/harness"
)

// The steps of TestClusterKustomize that follow a newcomer's path through
// policy engines and GitOps (deployments/README.md, "Policy engines" and
// "GitOps"; docs/troubleshooting.md, "Check a node without a debug pod").

// repoFile returns the path of a file of the repository.
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	root, err := harness.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(root, rel)
}

func policyTools(t *testing.T) harness.PolicyTools {
	t.Helper()
	tools, err := harness.FindPolicyTools()
	require.NoError(t, err)
	return tools
}

// policyExceptionNextToDaemonSet installs Kyverno's PolicyException CRDs
// and applies deployments/policy/kyverno-policyexception.yaml next to the
// running DaemonSet: the API server checks both exceptions against
// Kyverno's schemas (strict field validation), and refuses a copy with a
// field the schema does not know.
func policyExceptionNextToDaemonSet(t *testing.T, c *harness.Cluster) {
	ctx := context.Background()
	tools := policyTools(t)
	require.NoError(t, c.InstallCRDs(ctx, tools.CRD("kyverno.io_policyexceptions.yaml"), tools.CRD("policies.kyverno.io_policyexceptions.yaml")))
	exception := repoFile(t, "deployments/policy/kyverno-policyexception.yaml")
	out := kubectl(t, c, "apply", "--validate=strict", "-f", exception)
	t.Logf("kubectl apply -f %s:\n%s", exception, out)
	for _, kind := range []string{"policyexceptions.kyverno.io", "policyexceptions.policies.kyverno.io"} {
		name := kubectl(t, c, "-n", driCDINamespace, "get", kind, "-o", "jsonpath={.items[*].metadata.name}")
		require.Equal(t, "dri-cdi-node-daemons", name, kind)
	}
	require.NoError(t, c.WaitDaemonSetReady(ctx, driCDINamespace, driCDIDaemonSet, 30*time.Second), "the DaemonSet it names runs next to it")

	raw, err := os.ReadFile(exception)
	require.NoError(t, err)
	broken := strings.Replace(string(raw), "  exceptions:\n", "  exceptionz:\n", 1)
	require.NotEqual(t, string(raw), broken)
	_, err = c.KubectlStdin(ctx, broken, "apply", "--dry-run=server", "--validate=strict", "-f", "-")
	require.ErrorContains(t, err, "exceptionz", "a field Kyverno's schema does not know is refused: the apply above was checked")
}

// doctorThroughAPIServerProxy reads the running daemons' /doctor reports
// the documented way, `kubectl get --raw .../pods/<pod>:<port>/proxy/doctor`,
// as a user whose only grant is deployments/policy/doctor-reader-role.yaml.
func doctorThroughAPIServerProxy(t *testing.T, c *harness.Cluster) {
	ctx := context.Background()
	kubectl(t, c, "apply", "-f", repoFile(t, "deployments/policy/doctor-reader-role.yaml"))
	pod := mustOnePod(t, c, driCDINamespace, driCDIPods)
	operator := []string{"--as=alice", "--as-group=dri-cdi-operators"}
	get := func(who []string, path string) (string, error) {
		return c.Kubectl(ctx, append(append([]string{}, who...), "get", "--raw", path)...)
	}
	proxy := func(port, query string) string {
		return fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:%s/proxy/doctor%s", driCDINamespace, pod.Metadata.Name, port, query)
	}

	for _, d := range []struct {
		port, scope string
		checks      []string
	}{
		{"9470", "checked by dri-cdi-agent from its container", []string{"kubelet.device-plugins", "devices", "cdi.specs", "cdi.cards", "cdi.nodes"}},
		{"9471", "checked by dri-cdi-nri from its container", []string{"kubelet.pod-resources", "containerd.nri.socket", "cdi.specs", "cdi.nodes"}},
	} {
		body, err := get(operator, proxy(d.port, "?format=json"))
		require.NoError(t, err, "the doctor-reader Role must be enough")
		var rep harness.DoctorReport
		require.NoError(t, json.Unmarshal([]byte(body), &rep), body)
		var scope struct {
			Scope      string   `json:"scope"`
			NotChecked []string `json:"notChecked"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &scope))
		text, err := get(operator, proxy(d.port, ""))
		require.NoError(t, err)
		t.Logf("%s:\n%s", proxy(d.port, ""), text)

		require.Equal(t, d.scope, scope.Scope)
		require.Contains(t, strings.Join(scope.NotChecked, "\n"), "containerd config")
		var names []string
		for _, r := range rep.Results {
			names = append(names, r.Name)
		}
		require.ElementsMatch(t, d.checks, names)
		require.Empty(t, rep.Failures(), "the running daemons find this node healthy")
		require.NotContains(t, body, "containerd.toml", "the served report never names or reads the containerd config")
		require.NotContains(t, body, "containerd.config")
	}

	// The grant is that Role and nothing more.
	_, err := get([]string{"--as=mallory"}, proxy("9470", ""))
	require.ErrorContains(t, err, "forbidden", "without the Role, no report")
	media := mustOnePod(t, c, "default", "app=media")
	_, err = get(operator, fmt.Sprintf("/api/v1/namespaces/default/pods/%s:80/proxy/", media.Metadata.Name))
	require.ErrorContains(t, err, "forbidden", "the Role reaches no pod outside dri-cdi")
}

// gitOpsExamples renders deployments/gitops and has the API server check
// what it has schemas for: the Argo CD Application against Argo CD's CRD,
// Flux's Namespace and OCIRepository against the core API and Flux's CRD
// (server-side dry run, strict field validation). Flux's HelmRelease CRD
// is not published in a Go module; deployments/test decodes it with
// Flux's own API types instead.
func gitOpsExamples(t *testing.T, c *harness.Cluster) {
	ctx := context.Background()
	tools := policyTools(t)
	require.NoError(t, c.InstallCRDs(ctx, tools.CRD("application-crd.yaml"), tools.CRD("source.toolkit.fluxcd.io_ocirepositories.yaml")))

	flux, err := c.Kustomize(ctx, repoFile(t, "deployments/gitops/flux"))
	require.NoError(t, err)
	var checked, skipped []string
	for _, doc := range strings.Split(flux, "\n---\n") {
		var head struct {
			Kind string `json:"kind"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &head))
		if head.Kind == "HelmRelease" {
			skipped = append(skipped, head.Kind)
			continue
		}
		_, err := c.KubectlStdin(ctx, doc, "apply", "--dry-run=server", "--validate=strict", "-f", "-")
		require.NoError(t, err, "flux %s", head.Kind)
		checked = append(checked, head.Kind)
	}
	sort.Strings(checked)
	require.Equal(t, []string{"Namespace", "OCIRepository"}, checked)
	require.Equal(t, []string{"HelmRelease"}, skipped)

	apply(t, c, "apiVersion: v1\nkind: Namespace\nmetadata: {name: argocd}\n")
	out := kubectl(t, c, "apply", "--dry-run=server", "--validate=strict", "-f", repoFile(t, "deployments/gitops/argocd/application.yaml"))
	t.Logf("argocd: %s", out)
	require.Contains(t, out, "application.argoproj.io/dri-cdi")
}

// policyRecipesOffline runs Kyverno's CLI and Gatekeeper's gator on the
// rendered manifests, offline: the upstream Pod Security Standards
// policies refuse the daemons without the recipes of deployments/policy
// and admit them with, and only for the manifests' own shape.
func policyRecipesOffline(t *testing.T, c toolRunner) {
	ctx := context.Background()
	tools := policyTools(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	var manifests []string
	for _, k := range []string{"base", "overlays/dra"} {
		out, err := c.Kustomize(ctx, repoFile(t, "deployments/kustomize/"+k))
		require.NoError(t, err)
		manifests = append(manifests, out)
	}
	// One file per rendering: Kyverno's CLI refuses two objects of one
	// name (the base's DaemonSet and the DRA overlay's device plugin).
	all := daemonSetsAndPods(t, manifests)
	resources := []string{write("resources-base.yaml", daemonSetsAndPods(t, manifests[:1])), write("resources-dra.yaml", daemonSetsAndPods(t, manifests[1:]))}
	exception := repoFile(t, "deployments/policy/kyverno-policyexception.yaml")
	// The v2 exception alone for ClusterPolicy, the CEL one alone for
	// ValidatingPolicy: each must do its job by itself.
	docs := strings.Split(string(mustRead(t, exception)), "\n---\n")
	require.Len(t, docs, 2)
	exceptions := map[string]string{"ClusterPolicy": write("exception-v2.yaml", docs[0]), "ValidatingPolicy": write("exception-cel.yaml", docs[1])}

	want := []string{"disallow-host-path", "require-run-as-non-root-user", "require-run-as-nonroot", "restrict-volume-types"}
	// The base with components/usage: the agent's usage grants trip two
	// more baseline policies, which the usage exception covers.
	usageDir := filepath.Join(dir, "usage")
	require.NoError(t, os.MkdirAll(usageDir, 0o755))
	rel := func(p string) string {
		r, err := filepath.Rel(usageDir, repoFile(t, p))
		require.NoError(t, err)
		return r
	}
	require.NoError(t, os.WriteFile(filepath.Join(usageDir, "kustomization.yaml"), []byte(fmt.Sprintf(
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- %s\ncomponents:\n- %s\n",
		rel("deployments/kustomize/base"), rel("deployments/kustomize/components/usage"))), 0o644))
	usageOut, err := c.Kustomize(ctx, usageDir)
	require.NoError(t, err)
	require.Contains(t, usageOut, "--usage=true")
	usageRes := write("resources-usage.yaml", daemonSetsAndPods(t, []string{usageOut}))
	usageDocs := strings.Split(mustReadString(t, repoFile(t, "deployments/policy/kyverno-policyexception-usage.yaml")), "\n---\n")
	require.Len(t, usageDocs, 2)
	usageExceptions := map[string]string{"ClusterPolicy": write("usage-exception-v2.yaml", usageDocs[0]), "ValidatingPolicy": write("usage-exception-cel.yaml", usageDocs[1])}
	// Kyverno 1.19's ClusterPolicy form of restrict-apparmor-profiles
	// checks the annotation only; its ValidatingPolicy form checks the
	// field too.
	usageExtra := map[string][]string{
		"ClusterPolicy":    {"disallow-capabilities", "disallow-capabilities-strict"},
		"ValidatingPolicy": {"disallow-capabilities", "disallow-capabilities-strict", "restrict-apparmor-profiles"},
	}

	for _, policyType := range []string{"ClusterPolicy", "ValidatingPolicy"} {
		t.Run("kyverno-"+policyType, func(t *testing.T) {
			// helm template does not ask the API server for its version;
			// the chart wants Kubernetes >= 1.25.
			rendered, err := c.Helm(ctx, "template", "pss", filepath.Join(tools.Data, "kyverno-policies"), "--kube-version", "v1.37.2",
				"--set", "podSecurityStandard=restricted", "--set", "policyType="+policyType,
				"--set", "validationFailureAction=Enforce", "--set", "includeRestrictedPolicies={require-run-as-non-root-user}")
			require.NoError(t, err)
			policies := write("policies-"+policyType+".yaml", rendered)

			for _, res := range resources {
				without, _ := c.Run(ctx, tools.Kyverno, "apply", policies, "--resource", res, "--detailed-results", "--remove-color")
				t.Logf("kyverno apply %s without the exception:\n%s", filepath.Base(res), without)
				require.Equal(t, want, failedPolicies(without), "the policies that refuse the daemons")

				with, err := c.Run(ctx, tools.Kyverno, "apply", policies, "--resource", res, "--exception", exceptions[policyType], "--detailed-results", "--remove-color")
				t.Logf("kyverno apply %s with the exception:\n%s", filepath.Base(res), with)
				require.NoError(t, err)
				require.Empty(t, failedPolicies(with))
				require.Regexp(t, `fail: 0\b`, with)

				// The exception is scoped: the same shape under another
				// name or namespace is still refused.
				other := write("other-"+policyType+".yaml", strings.NewReplacer("namespace: dri-cdi", "namespace: apps", "name: dri-cdi", "name: not-dri-cdi").Replace(mustReadString(t, res)))
				stranger, _ := c.Run(ctx, tools.Kyverno, "apply", policies, "--resource", other, "--exception", exceptions[policyType], "--detailed-results", "--remove-color")
				require.Equal(t, want, failedPolicies(stranger), "the exception must not admit other workloads:\n%s", stranger)
			}

			// Usage on: refused by two more policies; the base exception
			// alone leaves exactly those; with the usage exception too,
			// nothing.
			usageWant := append(slices.Clone(want), usageExtra[policyType]...)
			sort.Strings(usageWant)
			without, _ := c.Run(ctx, tools.Kyverno, "apply", policies, "--resource", usageRes, "--detailed-results", "--remove-color")
			require.Equal(t, usageWant, failedPolicies(without), "the policies that refuse the agent with usage on:\n%s", without)
			baseOnly, _ := c.Run(ctx, tools.Kyverno, "apply", policies, "--resource", usageRes, "--exception", exceptions[policyType], "--detailed-results", "--remove-color")
			require.Equal(t, usageExtra[policyType], failedPolicies(baseOnly), "usage's grants need the usage exception:\n%s", baseOnly)
			both, err := c.Run(ctx, tools.Kyverno, "apply", policies, "--resource", usageRes, "--exception", exceptions[policyType], "--exception", usageExceptions[policyType], "--detailed-results", "--remove-color")
			t.Logf("kyverno apply %s with both exceptions:\n%s", filepath.Base(usageRes), both)
			require.NoError(t, err)
			require.Empty(t, failedPolicies(both))
			require.Regexp(t, `fail: 0\b`, both)
		})
	}

	t.Run("gator", func(t *testing.T) {
		// gator reads a suite's files relative to the suite: everything
		// goes into one directory.
		suiteDir := filepath.Join(dir, "suite")
		require.NoError(t, os.MkdirAll(suiteDir, 0o755))
		put := func(name, body string) string {
			require.NoError(t, os.WriteFile(filepath.Join(suiteDir, name), []byte(body), 0o644))
			return name
		}
		constraints := strings.Split(mustReadString(t, repoFile(t, "deployments/policy/gatekeeper-constraints.yaml")), "\n---\n")
		require.Len(t, constraints, 2)
		pods := splitDocs(all, "Pod")
		require.Len(t, pods, 3)
		var cases strings.Builder
		for i, p := range pods {
			fmt.Fprintf(&cases, "  - name: daemon-pod-%d\n    object: %s\n    assertions:\n    - violations: no\n", i, put(fmt.Sprintf("pod-%d.yaml", i), p))
		}
		// One more host path, and a read-only path mounted writable: both
		// must be refused.
		extra := strings.Replace(pods[0], "  volumes:\n", "  volumes:\n  - hostPath:\n      path: /etc\n      type: Directory\n    name: host-etc\n", 1)
		require.NotEqual(t, pods[0], extra)
		writable := regexp.MustCompile(`(?m)^(\s+- mountPath: /dev/dri\n\s+name: dev-dri\n\s+)readOnly: true`).ReplaceAllString(pods[0], "${1}readOnly: false")
		require.NotEqual(t, pods[0], writable, "the writable case must differ")
		suite := fmt.Sprintf(`kind: Suite
apiVersion: test.gatekeeper.sh/v1alpha1
tests:
- name: host-filesystem
  template: %s
  constraint: %s
  cases:
%s  - name: another-host-path
    object: %s
    assertions:
    - violations: yes
  - name: dev-dri-writable
    object: %s
    assertions:
    - violations: yes
- name: volume-types
  template: %s
  constraint: %s
  cases:
%s  - name: another-volume-type
    object: %s
    assertions:
    - violations: yes
`, put("t-hostfs.yaml", mustReadString(t, filepath.Join(tools.Data, "gatekeeper-library/host-filesystem-template.yaml"))),
			put("c-hostfs.yaml", constraints[0]), cases.String(), put("extra.yaml", extra), put("writable.yaml", writable),
			put("t-volumes.yaml", mustReadString(t, filepath.Join(tools.Data, "gatekeeper-library/volume-template.yaml"))),
			put("c-volumes.yaml", constraints[1]), cases.String(),
			put("emptydir.yaml", strings.Replace(pods[0], "  volumes:\n", "  volumes:\n  - emptyDir: {}\n    name: scratch\n", 1)))
		put("suite.yaml", suite)
		out, err := c.Run(ctx, tools.Gator, "verify", "-v", suiteDir)
		t.Logf("gator verify:\n%s", out)
		require.NoError(t, err)
	})
}

// toolRunner runs the test bed's tools; *harness.Cluster is one.
type toolRunner interface {
	Run(ctx context.Context, bin string, args ...string) (string, error)
	Kustomize(ctx context.Context, dir string) (string, error)
	Helm(ctx context.Context, args ...string) (string, error)
}

var failedLine = regexp.MustCompile(`(?m)policy (\S+) -> resource \S+ failed`)

// failedPolicies returns, sorted and without repeats, the policies
// `kyverno apply` reports a failure of.
func failedPolicies(out string) []string {
	set := map[string]bool{}
	for _, m := range failedLine.FindAllStringSubmatch(out, -1) {
		set[m[1]] = true
	}
	var names []string
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// daemonSetsAndPods returns the DaemonSets of the rendered manifests and,
// for each, the pod its controller creates (the template, named after
// the DaemonSet, owned by it).
func daemonSetsAndPods(t *testing.T, manifests []string) string {
	t.Helper()
	var out []string
	for _, m := range manifests {
		for _, doc := range splitDocs(m, "DaemonSet") {
			var ds struct {
				Metadata struct {
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"metadata"`
				Spec struct {
					Template struct {
						Metadata map[string]any `json:"metadata"`
						Spec     map[string]any `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(doc), &ds))
			meta := ds.Spec.Template.Metadata
			if meta == nil {
				meta = map[string]any{}
			}
			meta["name"] = ds.Metadata.Name + "-x7k2p"
			meta["namespace"] = ds.Metadata.Namespace
			meta["ownerReferences"] = []any{map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds.Metadata.Name,
				"uid": "00000000-0000-0000-0000-000000000001", "controller": true}}
			pod, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": ds.Spec.Template.Spec})
			require.NoError(t, err)
			out = append(out, strings.TrimSpace(doc), strings.TrimSpace(string(pod)))
		}
	}
	require.NotEmpty(t, out)
	return strings.Join(out, "\n---\n") + "\n"
}

// splitDocs returns the documents of a YAML stream of one kind.
func splitDocs(stream, kind string) []string {
	var out []string
	for _, doc := range strings.Split(stream, "\n---\n") {
		if regexp.MustCompile(`(?m)^kind: ` + kind + `$`).MatchString(doc) {
			out = append(out, doc+"\n")
		}
	}
	return out
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return raw
}

func mustReadString(t *testing.T, path string) string { return string(mustRead(t, path)) }
