package test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Release is the release name and namespace the chart is rendered with.
const (
	ReleaseName      = "dri-cdi"
	ReleaseNamespace = "dri-cdi"
)

// RenderKustomize builds the kustomization in dir, as `kustomize build dir`.
func RenderKustomize(dir string) ([]byte, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return out, nil
}

// RenderChart renders the chart in dir with the given values files (merged
// in order over the chart's values.yaml), as `helm template` would for an
// install, validating the values against values.schema.json.
func RenderChart(dir string, valuesFiles ...string) ([]byte, error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	vals := map[string]any{}
	for _, f := range valuesFiles {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("values file: %w", err)
		}
		v := map[string]any{}
		if err := yaml.UnmarshalStrict(raw, &v); err != nil {
			return nil, fmt.Errorf("values file %s: %w", f, err)
		}
		vals = chartutil.CoalesceTables(v, vals)
	}
	opts := chartutil.ReleaseOptions{Name: ReleaseName, Namespace: ReleaseNamespace, Revision: 1, IsInstall: true}
	rv, err := chartutil.ToRenderValues(chrt, vals, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("chart %s values %v: %w", dir, valuesFiles, err)
	}
	files, err := engine.Engine{Strict: true}.Render(chrt, rv)
	if err != nil {
		return nil, fmt.Errorf("render chart %s with %v: %w", dir, valuesFiles, err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") || strings.HasPrefix(filepath.Base(name), "_") {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	for _, name := range names {
		body := strings.TrimSpace(files[name])
		if body == "" {
			continue
		}
		fmt.Fprintf(&buf, "---\n# Source: %s\n%s\n", name, body)
	}
	return buf.Bytes(), nil
}
