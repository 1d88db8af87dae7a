package test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/shlex"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/kustomize/v5/commands"
)

// documentedCommands returns the shell lines of doc that start with
// prefix, in order, from its fenced code blocks.
func documentedCommands(t *testing.T, doc, prefix string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, doc))
	require.NoError(t, err)
	var out []string
	inBlock := false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock && strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return out
}

// kustomizeCLI runs one kustomize command line in dir with the real
// kustomize command tree (the one the kustomize binary runs).
func kustomizeCLI(t *testing.T, dir, line string) {
	t.Helper()
	args, err := shlex.Split(line)
	require.NoError(t, err, line)
	require.Equal(t, "kustomize", args[0])
	t.Chdir(dir)
	cmd := commands.NewDefaultCommand()
	cmd.SetArgs(args[1:])
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	require.NoError(t, cmd.Execute(), "%s: %s", line, out.String())
}

// remoteOverlay matches the repository URLs the docs give to kustomize,
// to map them onto this checkout.
var remoteOverlay = regexp.MustCompile(`https://github\.com/dri-cdi/dri-cdi/(deployments/kustomize/[^?'"]+)\?ref=[^'"\s]+`)

// TestImageOverrideAsDocumented runs the commands deployments/README.md
// gives for pointing the image at a mirror, in a fresh overlay, and checks
// the image of every rendered container.
func TestImageOverrideAsDocumented(t *testing.T) {
	creates := documentedCommands(t, "deployments/README.md", "kustomize create ")
	sets := documentedCommands(t, "deployments/README.md", "kustomize edit set image ")
	require.Len(t, creates, 1, "deployments/README.md shows one `kustomize create` for your own overlay")
	require.Len(t, sets, 1, "deployments/README.md shows one `kustomize edit set image`")

	// kustomize refuses absolute resource paths: point at this checkout
	// relative to the new overlay.
	dir := t.TempDir()
	abs, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	rel, err := filepath.Rel(dir, abs)
	require.NoError(t, err)
	create := remoteOverlay.ReplaceAllString(creates[0], filepath.Join(rel, "$1"))
	require.NotEqual(t, creates[0], create, "the documented overlay is a remote of this repository: %s", creates[0])
	const mirror, tag = "registry.example.com/mirror", "v9.8.7-mirrored"
	set := strings.NewReplacer("<mirror>", mirror, "<tag>", tag).Replace(sets[0])

	kustomizeCLI(t, dir, create)
	kustomizeCLI(t, dir, set)

	render := func() ([]byte, error) { return RenderKustomize(dir) }
	spec := mustRender(t, dir, render).daemonSet(t).Spec.Template.Spec
	require.NotEmpty(t, spec.Containers)
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		require.Equal(t, mirror+"/dri-cdi:"+tag, c.Image, "container %s", c.Name)
	}
}
