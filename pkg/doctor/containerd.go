package doctor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	cdilib "tags.cncf.io/container-device-interface/pkg/cdi"
)

// ErrBadConfig marks a containerd config that cannot be read as one.
var ErrBadConfig = errors.New("invalid containerd config")

// Plugin sections of the containerd config that matter here.
const (
	pluginCRIv3 = "io.containerd.cri.v1.runtime" // version 3 (containerd >= 2.0)
	pluginCRIv2 = "io.containerd.grpc.v1.cri"    // version 2
	pluginCRIv1 = "cri"                          // version 1
	pluginNRI   = "io.containerd.nri.v1.nri"
)

// defaultCDISpecDirs are containerd's cdi_spec_dirs when the key is unset.
var defaultCDISpecDirs = cdilib.DefaultSpecDirs

// containerdConfig holds the settings of a containerd config, with its
// imports merged the way containerd merges them.
type containerdConfig struct {
	// Path is the main file; Imports the files merged into it, in order.
	Path    string
	Imports []string
	// ImportPatterns are the imports keys as the files give them, before
	// globbing (a drop-in directory with no file yet matches nothing).
	ImportPatterns []string
	// Version is the config's version key; 1 when it has none.
	Version int
	// EnableCDI is the enable_cdi key of the CRI plugin, nil when unset.
	EnableCDI *bool
	// CDISpecDirs is the cdi_spec_dirs key, nil when unset.
	CDISpecDirs []string
	// NRISection is true when the config has an NRI plugin section.
	NRISection bool
	// NRIDisable and NRIDisableConnections are the NRI keys, nil when unset.
	NRIDisable, NRIDisableConnections *bool
	// NRISocketPath is the NRI socket_path key, "" when unset.
	NRISocketPath string
}

// loadContainerdConfig reads a containerd config and the files it
// imports. As containerd does, imports are read after the file that names
// them, relative paths are relative to that file's directory, globs are
// expanded, and a plugin section in a later file replaces the whole
// section of an earlier one.
// host maps each host path (the config and its absolute imports) to where
// this process sees it.
func loadContainerdConfig(path string, host func(string) string) (*containerdConfig, error) {
	cfg := &containerdConfig{Path: path}
	plugins := map[string]any{}
	version := 0
	seen := map[string]bool{}
	pending := []string{path}
	for len(pending) > 0 {
		p := pending[0]
		pending = pending[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		if p != path {
			cfg.Imports = append(cfg.Imports, p)
		}
		raw, err := os.ReadFile(host(p))
		if err != nil {
			return nil, fmt.Errorf("read containerd config: %w", err)
		}
		doc, err := parseContainerdConfig(p, raw)
		if err != nil {
			return nil, err
		}
		if v, ok := doc["version"]; ok {
			n, ok := v.(int64)
			if !ok || n < 1 || n > 3 {
				return nil, fmt.Errorf("%w %s: version = %v: want 1, 2 or 3", ErrBadConfig, p, v)
			}
			if p == path || version == 0 {
				version = int(n)
			}
		}
		if ps, ok := doc["plugins"]; ok {
			m, ok := ps.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%w %s: plugins is not a table", ErrBadConfig, p)
			}
			for k, v := range m {
				plugins[k] = v
			}
		}
		imports, err := stringList(doc, "imports")
		if err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrBadConfig, p, err)
		}
		for _, imp := range imports {
			if !filepath.IsAbs(imp) {
				imp = filepath.Join(filepath.Dir(p), imp)
			}
			cfg.ImportPatterns = append(cfg.ImportPatterns, imp)
			matches, err := filepath.Glob(host(imp))
			if err != nil {
				return nil, fmt.Errorf("%w %s: import %q: %w", ErrBadConfig, p, imp, err)
			}
			sort.Strings(matches)
			for _, m := range matches {
				// Back to the host path: the part below the root.
				rel, err := filepath.Rel(host("/"), m)
				if err != nil {
					return nil, fmt.Errorf("%w %s: import %q: %w", ErrBadConfig, p, m, err)
				}
				pending = append(pending, "/"+rel)
			}
		}
	}
	if version == 0 {
		version = 1
	}
	cfg.Version = version

	if err := cfg.extract(plugins); err != nil {
		return nil, err
	}
	return cfg, nil
}

// extract reads the settings from the merged plugin sections.
func (cfg *containerdConfig) extract(plugins map[string]any) error {
	cri := pluginCRIv2
	switch cfg.Version {
	case 3:
		cri = pluginCRIv3
	case 1:
		cri = pluginCRIv1
	}
	if sec, err := section(plugins, cri); err != nil {
		return fmt.Errorf("%w %s: %w", ErrBadConfig, cfg.Path, err)
	} else if sec != nil {
		if cfg.EnableCDI, err = boolKey(sec, "enable_cdi"); err != nil {
			return fmt.Errorf("%w %s: plugins.%q: %w", ErrBadConfig, cfg.Path, cri, err)
		}
		if cfg.CDISpecDirs, err = stringList(sec, "cdi_spec_dirs"); err != nil {
			return fmt.Errorf("%w %s: plugins.%q: %w", ErrBadConfig, cfg.Path, cri, err)
		}
		if _, set := sec["cdi_spec_dirs"]; set && cfg.CDISpecDirs == nil {
			cfg.CDISpecDirs = []string{}
		}
	}
	sec, err := section(plugins, pluginNRI)
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrBadConfig, cfg.Path, err)
	}
	if sec != nil {
		cfg.NRISection = true
		if cfg.NRIDisable, err = boolKey(sec, "disable"); err != nil {
			return fmt.Errorf("%w %s: plugins.%q: %w", ErrBadConfig, cfg.Path, pluginNRI, err)
		}
		if cfg.NRIDisableConnections, err = boolKey(sec, "disable_connections"); err != nil {
			return fmt.Errorf("%w %s: plugins.%q: %w", ErrBadConfig, cfg.Path, pluginNRI, err)
		}
		if v, ok := sec["socket_path"]; ok {
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("%w %s: plugins.%q: socket_path is not a string", ErrBadConfig, cfg.Path, pluginNRI)
			}
			cfg.NRISocketPath = s
		}
	}
	return nil
}

// parseContainerdConfig parses one TOML file into a generic document.
func parseContainerdConfig(path string, raw []byte) (map[string]any, error) {
	doc := map[string]any{}
	if err := toml.Unmarshal(raw, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("%w %s:%d:%d: %s", ErrBadConfig, path, row, col, de.Error())
		}
		return nil, fmt.Errorf("%w %s: %w", ErrBadConfig, path, err)
	}
	return doc, nil
}

func section(plugins map[string]any, name string) (map[string]any, error) {
	v, ok := plugins[name]
	if !ok {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("plugins.%q is not a table", name)
	}
	return m, nil
}

func boolKey(m map[string]any, key string) (*bool, error) {
	v, ok := m[key]
	if !ok {
		return nil, nil
	}
	b, ok := v.(bool)
	if !ok {
		return nil, fmt.Errorf("%s = %v is not a boolean", key, v)
	}
	return &b, nil
}

func stringList(m map[string]any, key string) ([]string, error) {
	v, ok := m[key]
	if !ok {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s is not a list", key)
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("%s holds %v, not a string", key, e)
		}
		out = append(out, s)
	}
	return out, nil
}

// semver is a parsed containerd version; zero when unknown.
type semver struct{ major, minor int }

func (v semver) known() bool { return v.major > 0 }

func (v semver) atLeast(major, minor int) bool {
	return v.major > major || (v.major == major && v.minor >= minor)
}

// parseVersion accepts "2.4.2", "v1.7.27", the output of
// `containerd --version` ("containerd github.com/... v2.4.2 <commit>") or
// `k3s ctr version`, or a node's CONTAINER-RUNTIME as kubectl prints it
// ("containerd://2.3.2-k3s2").
func parseVersion(s string) (semver, error) {
	if s == "" {
		return semver{}, nil
	}
	for _, f := range strings.Fields(s) {
		f = strings.TrimPrefix(f, "containerd://")
		f = strings.TrimPrefix(f, "v")
		parts := strings.SplitN(f, ".", 3)
		if len(parts) < 2 {
			continue
		}
		major, err1 := strconv.Atoi(parts[0])
		minor, err2 := strconv.Atoi(parts[1])
		if err1 == nil && err2 == nil && major > 0 {
			return semver{major, minor}, nil
		}
	}
	return semver{}, fmt.Errorf("invalid containerd version %q: want e.g. 2.4.2", s)
}
