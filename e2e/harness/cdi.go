package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"sigs.k8s.io/yaml"
)

// CDISpecFile is the part of a CDI spec file the scenarios read.
type CDISpecFile struct {
	// Path of the file.
	Path string
	// Kind is the spec's vendor/class.
	Kind string `json:"kind"`
	// Devices lists the spec's devices.
	Devices []struct {
		Name           string `json:"name"`
		ContainerEdits struct {
			DeviceNodes []struct {
				Path     string `json:"path"`
				HostPath string `json:"hostPath"`
				Type     string `json:"type"`
				Major    int64  `json:"major"`
				Minor    int64  `json:"minor"`
			} `json:"deviceNodes"`
		} `json:"containerEdits"`
	} `json:"devices"`
}

// ReadCDISpecs reads every .yaml and .json file in dir.
func ReadCDISpecs(dir string) ([]CDISpecFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read CDI dir %s: %w", dir, err)
	}
	var specs []CDISpecFile
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || ext != ".yaml" && ext != ".json" {
			continue
		}
		p := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var s CDISpecFile
		if err := yaml.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("parse CDI spec %s: %w", p, err)
		}
		s.Path = p
		specs = append(specs, s)
	}
	return specs, nil
}

// CDINames returns the qualified names (kind=name) of every device in
// the CDI specs in dir, sorted.
func CDINames(dir string) ([]string, error) {
	specs, err := ReadCDISpecs(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range specs {
		for _, d := range s.Devices {
			names = append(names, s.Kind+"="+d.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}
