package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const gitopsDir = "../gitops"

// chartRef is where each release publishes the chart (Makefile
// CHART_REPO) and its version (Chart.yaml).
func chartRef(t *testing.T) (repo, name, version string) {
	t.Helper()
	var chart struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &chart))
	return "ghcr.io/dri-cdi/charts", chart.Name, chart.Version
}

// baseNamespace is the kustomize base's Namespace, whose Pod Security
// labels every other way of creating the namespace must repeat.
func baseNamespace(t *testing.T) *corev1.Namespace {
	t.Helper()
	ns := only[*corev1.Namespace](t, mustRender(t, "kustomize-base", variants["kustomize-base"].render).objs, "Namespace")
	require.NotEmpty(t, psaLabels(ns.Labels))
	return ns
}

// psaLabels are the Pod Security Admission labels among labels.
func psaLabels(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if strings.HasPrefix(k, "pod-security.kubernetes.io/") {
			out[k] = v
		}
	}
	return out
}

// requireValuesRender renders the chart with values as a GitOps tool
// would hand them to Helm: they must pass the chart's values schema.
func requireValuesRender(t *testing.T, what string, values []byte) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(f, values, 0o644))
	_, err := RenderChart(chartDir, f)
	require.NoError(t, err, "%s: the chart refuses these values", what)
}

// TestFluxExample renders ../gitops/flux as Flux's kustomize-controller
// would, decodes every object strictly into Flux's own API types, and
// checks that it installs the published chart into a namespace labelled
// like the base's, with values the chart accepts.
func TestFluxExample(t *testing.T) {
	objs := mustRender(t, "gitops-flux", kustomize("../gitops/flux")).objs
	ns := only[*corev1.Namespace](t, objs, "Namespace")
	repo := only[*sourcev1.OCIRepository](t, objs, "OCIRepository")
	hr := only[*helmv2.HelmRelease](t, objs, "HelmRelease")

	require.Equal(t, psaLabels(baseNamespace(t).Labels), psaLabels(ns.Labels), "the namespace carries the base's Pod Security labels")
	registry, chart, version := chartRef(t)
	require.Equal(t, "oci://"+registry+"/"+chart, repo.Spec.URL)
	require.NotNil(t, repo.Spec.Reference)
	require.Equal(t, version, repo.Spec.Reference.Tag, "the chart version of this release")
	require.NotNil(t, repo.Spec.LayerSelector)
	require.Equal(t, "application/vnd.cncf.helm.chart.content.v1.tar+gzip", repo.Spec.LayerSelector.MediaType)

	require.Equal(t, ns.Name, repo.Namespace)
	require.Equal(t, ns.Name, hr.Namespace)
	require.Contains(t, []string{"", ns.Name}, hr.Spec.TargetNamespace)
	require.NotNil(t, hr.Spec.ChartRef)
	require.Equal(t, sourcev1.OCIRepositoryKind, hr.Spec.ChartRef.Kind)
	require.Equal(t, repo.Name, hr.Spec.ChartRef.Name)
	require.Contains(t, []string{"", repo.Namespace}, hr.Spec.ChartRef.Namespace)
	// The release name makes the DaemonSet "dri-cdi", the name the
	// policy exceptions (../policy) admit.
	require.Equal(t, ReleaseName, hr.Spec.ReleaseName)
	require.True(t, hr.Spec.Install == nil || !hr.Spec.Install.CreateNamespace, "a namespace Flux creates has no Pod Security labels")
	require.NotNil(t, hr.Spec.Values)
	requireValuesRender(t, "HelmRelease spec.values", hr.Spec.Values.Raw)
}

// argoApplication holds the fields of an Argo CD Application that the
// example uses; it is decoded strictly, so a field this struct does not
// know fails the test (the cluster e2e checks the example against Argo
// CD's CRD schema).
type argoApplication struct {
	namespacedHead
	Spec struct {
		Project string `json:"project"`
		Source  struct {
			RepoURL        string `json:"repoURL"`
			Chart          string `json:"chart"`
			TargetRevision string `json:"targetRevision"`
			Helm           struct {
				ReleaseName  string          `json:"releaseName"`
				ValuesObject json.RawMessage `json:"valuesObject"`
			} `json:"helm"`
		} `json:"source"`
		Destination struct {
			Server    string `json:"server"`
			Namespace string `json:"namespace"`
		} `json:"destination"`
		SyncPolicy struct {
			Automated                struct{} `json:"automated"`
			SyncOptions              []string `json:"syncOptions"`
			ManagedNamespaceMetadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"managedNamespaceMetadata"`
		} `json:"syncPolicy"`
	} `json:"spec"`
}

// TestArgoCDExample checks that the Application installs the published
// chart, and that Argo CD creates the namespace with the base's Pod
// Security labels (the chart creates no namespace).
func TestArgoCDExample(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(gitopsDir, "argocd/application.yaml"))
	require.NoError(t, err)
	var app argoApplication
	require.NoError(t, yaml.UnmarshalStrict(raw, &app))
	require.Equal(t, "argoproj.io/v1alpha1", app.APIVersion)
	require.Equal(t, "Application", app.Kind)

	registry, chart, version := chartRef(t)
	require.Equal(t, registry, app.Spec.Source.RepoURL, "Argo CD names an OCI Helm repository without oci://")
	require.Equal(t, chart, app.Spec.Source.Chart)
	require.Equal(t, version, app.Spec.Source.TargetRevision)
	require.Equal(t, ReleaseName, app.Spec.Source.Helm.ReleaseName)
	require.Equal(t, ReleaseNamespace, app.Spec.Destination.Namespace)
	require.True(t, slices.Contains(app.Spec.SyncPolicy.SyncOptions, "CreateNamespace=true"), "Argo CD must create the namespace: the chart does not")
	require.Equal(t, psaLabels(baseNamespace(t).Labels), psaLabels(app.Spec.SyncPolicy.ManagedNamespaceMetadata.Labels),
		"managedNamespaceMetadata carries the base's Pod Security labels")
	values, err := yaml.JSONToYAML(app.Spec.Source.Helm.ValuesObject)
	require.NoError(t, err)
	requireValuesRender(t, "Application helm.valuesObject", values)
}

// TestGitOpsVersionsMove: scripts/set-version.sh moves the chart version
// in the GitOps examples too, so that they keep naming this release.
func TestGitOpsVersionsMove(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "scripts/set-version.sh"))
	require.NoError(t, err)
	require.True(t, strings.Contains(string(raw), "deployments/gitops"), "scripts/set-version.sh must rewrite deployments/gitops")
}
