package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin"
)

// Environment variables that move the harness's directories.
const (
	// EnvCache is the tool cache that e2e/tools/install.sh fills; the
	// harness runs the binaries in its bin/ directory.
	EnvCache = "DRI_CDI_E2E_CACHE"
	// EnvWorkDir holds one directory per running node.
	EnvWorkDir = "DRI_CDI_E2E_WORKDIR"
	// EnvProductBin holds dri-cdi, dri-cdi-agent and dri-cdi-nri.
	EnvProductBin = "DRI_CDI_E2E_PRODUCT_BIN"
)

// Defaults for the directories above.
const (
	DefaultCache   = "/var/cache/dri-cdi-e2e"
	DefaultWorkDir = "/var/lib/dri-cdi-e2e"
	// DevicePluginDir is where the kubelet serves kubelet.sock, whatever
	// its --root-dir says.
	DevicePluginDir = deviceplugin.DefaultKubeletDir
	// LockPath serializes nodes on one machine.
	LockPath = "/run/dri-cdi-e2e.lock"
)

// ErrMissingBinary is wrapped when a tool or product binary is not there.
var ErrMissingBinary = errors.New("binary not found")

// Tools are the external programs the harness runs.
type Tools struct {
	Kubelet    string
	Containerd string
	Shim       string
	Ctr        string
	Runc       string
	Crictl     string
}

// FindTools locates the tools in $DRI_CDI_E2E_CACHE/bin.
func FindTools() (Tools, error) {
	dir := filepath.Join(envOr(EnvCache, DefaultCache), "bin")
	t := Tools{
		Kubelet:    filepath.Join(dir, "kubelet"),
		Containerd: filepath.Join(dir, "containerd"),
		Shim:       filepath.Join(dir, "containerd-shim-runc-v2"),
		Ctr:        filepath.Join(dir, "ctr"),
		Runc:       filepath.Join(dir, "runc"),
		Crictl:     filepath.Join(dir, "crictl"),
	}
	return t, requireTools(t.Kubelet, t.Containerd, t.Shim, t.Ctr, t.Runc, t.Crictl)
}

// requireTools names every path that is not an executable file in one
// error, so that one run tells which tools `make e2e-tools` must build.
func requireTools(paths ...string) error {
	var missing []string
	for _, p := range paths {
		if err := executable(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s (run `make e2e-tools` as root)", ErrMissingBinary, strings.Join(missing, ", "))
	}
	return nil
}

// Product are the dri-cdi binaries under test.
type Product struct {
	CLI   string
	Agent string
	NRI   string
}

// FindProduct returns where the dri-cdi binaries are expected:
// $DRI_CDI_E2E_PRODUCT_BIN, else bin/ at the repository root. It does not
// require them to exist; starting a binary that is not there fails then.
func FindProduct() (Product, error) {
	dir := os.Getenv(EnvProductBin)
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return Product{}, err
		}
		dir = filepath.Join(root, "bin")
	}
	return Product{
		CLI:   filepath.Join(dir, "dri-cdi"),
		Agent: filepath.Join(dir, "dri-cdi-agent"),
		NRI:   filepath.Join(dir, "dri-cdi-nri"),
	}, nil
}

// RepoRoot finds the dri-cdi repository from the working directory up.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if isProductModule(filepath.Join(d, "go.mod")) {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("find repository root: no go.mod of github.com/dri-cdi/dri-cdi above %s", dir)
		}
	}
}

func isProductModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == "github.com/dri-cdi/dri-cdi"
		}
	}
	return false
}

func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMissingBinary, path, err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%w: %s is not an executable file", ErrMissingBinary, path)
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
