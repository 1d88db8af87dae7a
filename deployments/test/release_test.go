package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	yamlv3 "go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	"github.com/dri-cdi/dri-cdi/pkg/version"
)

const (
	repoRoot = "../.."
	// imageRepository is the image every manifest names.
	imageRepository = "ghcr.io/dri-cdi/dri-cdi"
)

var semverTag = regexp.MustCompile(`^v(\d+\.\d+\.\d+)$`)

// releaseVersion is the one source of the release version: VERSION at the
// repository root.
func releaseVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	require.NoError(t, err)
	v := strings.TrimSpace(string(raw))
	require.Regexp(t, semverTag, v, "VERSION must be vX.Y.Z")
	return v
}

// latestChangelogVersion is the version of the first "## [vX.Y.Z]" entry.
func latestChangelogVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "CHANGELOG.md"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^## \[(v[^\]]+)\]`).FindStringSubmatch(string(raw))
	require.NotNil(t, m, "CHANGELOG.md has no \"## [vX.Y.Z]\" entry")
	return m[1]
}

// TestVersionsAgree checks every place that names the release version
// against VERSION: the chart's version and appVersion, the image tag of
// the kustomize base, pkg/version's default, the newest CHANGELOG entry,
// the images both renderings produce and the install commands in the
// README.
func TestVersionsAgree(t *testing.T) {
	v := releaseVersion(t)
	semver := semverTag.FindStringSubmatch(v)[1]

	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &chart))
	require.Equal(t, semver, chart.Version, "Chart.yaml version")
	require.Equal(t, v, chart.AppVersion, "Chart.yaml appVersion")

	var k types.Kustomization
	raw, err = os.ReadFile(filepath.Join(kustomizeDir, "base/kustomization.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(raw, &k))
	require.Len(t, k.Images, 1)
	require.Equal(t, imageRepository, k.Images[0].Name)
	require.Empty(t, k.Images[0].NewName, "the base keeps the registry name, so that overlays can override it")
	require.Equal(t, v, k.Images[0].NewTag, "kustomize base image tag")

	require.Equal(t, v, version.Version, "pkg/version default")
	require.Equal(t, v, latestChangelogVersion(t), "newest CHANGELOG.md entry")

	for _, name := range []string{"kustomize-base", "helm-default"} {
		ds := mustRender(t, name, variants[name].render).daemonSet(t)
		for _, c := range ds.Spec.Template.Spec.Containers {
			require.Equal(t, imageRepository+":"+v, c.Image, "%s container %s", name, c.Name)
		}
	}

	// The install commands a user copies name this release: both READMEs
	// show them, and every page that names a ref, a chart version or the
	// image tag names this one.
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs/*.md"))
	require.NoError(t, err)
	docs = append([]string{filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "deployments/README.md")}, docs...)
	for i, doc := range docs {
		raw, err := os.ReadFile(doc)
		require.NoError(t, err)
		refs := regexp.MustCompile(`\?ref=(v[0-9][^'"\s]*)`).FindAllStringSubmatch(string(raw), -1)
		charts := regexp.MustCompile(`oci://ghcr\.io/dri-cdi/charts/dri-cdi --version ([0-9][^\s]*)`).FindAllStringSubmatch(string(raw), -1)
		images := regexp.MustCompile(`ghcr\.io/dri-cdi/dri-cdi:(v[0-9][^\s`+"`"+`'")]*)`).FindAllStringSubmatch(string(raw), -1)
		if i < 2 {
			require.NotEmpty(t, refs, "%s shows kubectl apply -k ...?ref=%s", doc, v)
			require.NotEmpty(t, charts, "%s shows helm install oci://... --version %s", doc, semver)
		}
		for _, m := range images {
			require.Equal(t, v, m[1], "%s: %s", doc, m[0])
		}
		for _, m := range refs {
			require.Equal(t, v, m[1], "%s: %s", doc, m[0])
		}
		for _, m := range charts {
			require.Equal(t, semver, m[1], "%s: %s", doc, m[0])
		}
	}
}

// TestReleaseNotes runs the script the release workflow publishes the
// notes with, and checks that it prints the newest CHANGELOG entry and
// refuses a version without one.
func TestReleaseNotes(t *testing.T) {
	v := releaseVersion(t)
	script := filepath.Join(repoRoot, "scripts/release-notes.sh")
	out, err := exec.Command(script, v).Output()
	require.NoError(t, err)
	notes := string(out)
	require.NotEmpty(t, strings.TrimSpace(notes))
	require.NotContains(t, notes, "## ["+v+"]", "the heading is the release's title, not part of its notes")
	require.NotRegexp(t, `(?m)^## \[`, notes, "only one entry")
	raw, err := os.ReadFile(filepath.Join(repoRoot, "CHANGELOG.md"))
	require.NoError(t, err)
	require.Contains(t, string(raw), notes)

	err = exec.Command(script, "v0.0.0-none").Run()
	require.Error(t, err, "not vX.Y.Z")
	err = exec.Command(script, "v999.0.0").Run()
	require.Error(t, err, "no entry")
}

// TestPackagedChart packages the chart the way `helm package` (make chart)
// does and checks the archive's name and that it renders exactly what the
// chart directory renders, so .helmignore cannot drop a template or the
// values schema from the published chart.
func TestPackagedChart(t *testing.T) {
	semver := semverTag.FindStringSubmatch(releaseVersion(t))[1]
	chrt, err := loader.LoadDir(chartDir)
	require.NoError(t, err)
	path, err := chartutil.Save(chrt, t.TempDir())
	require.NoError(t, err)
	require.Equal(t, "dri-cdi-"+semver+".tgz", filepath.Base(path))

	packaged, err := loader.Load(path)
	require.NoError(t, err)
	require.NotNil(t, packaged.Schema, "values.schema.json is in the archive")
	for _, values := range [][]string{nil, {"testdata/helm/custom.yaml"}} {
		want, err := RenderChart(chartDir, values...)
		require.NoError(t, err)
		got, err := RenderChart(path, values...)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "values %v", values)
	}
	_, err = RenderChart(path, "testdata/helm/invalid/unknown-key.yaml")
	require.ErrorContains(t, err, "delivrey", "the packaged chart validates its values")
}

// TestReleaseWorkflowRunsMakeTargets keeps .github/workflows/release.yaml
// to its contract: it runs on tags vX.Y.Z, and every step it runs is one
// make target of the Makefile (so that each can be run, and most of them
// are, on a developer machine).
func TestReleaseWorkflowRunsMakeTargets(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, ".github/workflows/release.yaml"))
	require.NoError(t, err)
	var wf struct {
		On struct {
			Push struct {
				Tags []string `yaml:"tags"`
			} `yaml:"push"`
		} `yaml:"on"`
		Jobs map[string]struct {
			Steps []struct {
				Name string `yaml:"name"`
				Uses string `yaml:"uses"`
				Run  string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	// YAML 1.2 (yaml.v3): in YAML 1.1 the key "on" would be the boolean true.
	require.NoError(t, yamlv3.Unmarshal(raw, &wf))
	require.Equal(t, []string{"v*.*.*"}, wf.On.Push.Tags)

	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	require.NoError(t, err)
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(mk), -1) {
		targets[m[1]] = true
	}
	var run []string
	for _, job := range wf.Jobs {
		for _, s := range job.Steps {
			if s.Run == "" {
				require.NotEmpty(t, s.Uses, "step %q runs nothing", s.Name)
				continue
			}
			m := regexp.MustCompile(`^make ([a-z][a-z0-9-]*)\n?$`).FindStringSubmatch(s.Run)
			require.NotNil(t, m, "step %q runs %q, not one make target", s.Name, s.Run)
			require.True(t, targets[m[1]], "step %q: no target %s in the Makefile", s.Name, m[1])
			run = append(run, m[1])
		}
	}
	for _, want := range []string{"release-check", "dist", "chart", "image", "release-notes", "image-push", "chart-push", "github-release"} {
		require.Contains(t, run, want)
	}
}
