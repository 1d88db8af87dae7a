package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PolicyTools are the policy engines' offline tools and data that
// e2e/tools/install.sh builds and fetches for deployments/policy and
// deployments/gitops.
type PolicyTools struct {
	// Kyverno is Kyverno's CLI (kubectl-kyverno), Gator Gatekeeper's.
	Kyverno, Gator string
	// Data holds crds/ (Kyverno's PolicyException CRDs, Argo CD's
	// Application CRD, Flux's OCIRepository CRD), kyverno-policies/
	// (Kyverno's Pod Security Standards chart) and gatekeeper-library/
	// (the gatekeeper-library templates Gatekeeper's module carries).
	Data string
}

// FindPolicyTools locates the policy tools in $DRI_CDI_E2E_CACHE/bin.
func FindPolicyTools() (PolicyTools, error) {
	dir := filepath.Join(envOr(EnvCache, DefaultCache), "bin")
	t := PolicyTools{
		Kyverno: filepath.Join(dir, "kyverno"),
		Gator:   filepath.Join(dir, "gator"),
		Data:    filepath.Join(dir, "policy-data"),
	}
	if err := requireTools(t.Kyverno, t.Gator); err != nil {
		return t, err
	}
	if _, err := os.Stat(filepath.Join(t.Data, "crds")); err != nil {
		return t, fmt.Errorf("%w: %s (run `make e2e-tools` as root)", ErrMissingBinary, t.Data)
	}
	return t, nil
}

// CRD returns the path of one CRD file of the policy data.
func (t PolicyTools) CRD(name string) string { return filepath.Join(t.Data, "crds", name) }

// InstallCRDs creates the CRDs in files (server-side, as they are too
// big for the last-applied annotation) and waits until the API server
// serves them.
func (c *Cluster) InstallCRDs(ctx context.Context, files ...string) error {
	var names []string
	for _, f := range files {
		out, err := c.Kubectl(ctx, "apply", "--server-side", "-f", f, "-o", "name")
		if err != nil {
			return err
		}
		names = append(names, strings.Fields(out)...)
	}
	_, err := c.Kubectl(ctx, append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, names...)...)
	return err
}

// Run runs a tool of the test bed (kyverno, gator) with the cluster's
// environment and returns its standard output; a non-zero exit is an
// error that carries standard error.
func (c *Cluster) Run(ctx context.Context, bin string, args ...string) (string, error) {
	return c.run(ctx, "", bin, args...)
}
