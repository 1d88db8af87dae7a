package docs

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/nri"
	"github.com/dri-cdi/dri-cdi/pkg/cli"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
)

// section returns the lines of the Markdown section under the heading
// with exactly this text, up to the next heading of the same or a higher
// level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		level := len(l) - len(strings.TrimLeft(l, "#"))
		if level == 0 || strings.TrimSpace(l[level:]) != heading {
			continue
		}
		var out []string
		for _, m := range lines[i+1:] {
			if n := len(m) - len(strings.TrimLeft(m, "#")); n > 0 && n <= level && strings.HasPrefix(m[n:], " ") {
				break
			}
			out = append(out, m)
		}
		return strings.Join(out, "\n")
	}
	t.Fatalf("no section %q", heading)
	return ""
}

var firstCell = regexp.MustCompile("(?m)^\\| (`[^|]*)\\|")
var backticked = regexp.MustCompile("`-{0,2}([A-Za-z][A-Za-z0-9-]*)`")

// documented returns the names in backticks in the first column of the
// section's table rows, without leading dashes.
func documented(t *testing.T, doc, heading string) []string {
	t.Helper()
	var names []string
	for _, m := range firstCell.FindAllStringSubmatch(section(t, doc, heading), -1) {
		for _, n := range backticked.FindAllStringSubmatch(m[1], -1) {
			names = append(names, n[1])
		}
	}
	sort.Strings(names)
	return names
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(raw)
}

// jsonFields returns the JSON names of a struct type's fields.
func jsonFields(typ reflect.Type) []string {
	var names []string
	for i := 0; i < typ.NumField(); i++ {
		tag := typ.Field(i).Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func TestConfigFieldsDocumented(t *testing.T) {
	doc := readDoc(t, "configuration.md")
	require.Equal(t, jsonFields(reflect.TypeOf(config.Config{})), documented(t, doc, "Top-level fields"))
	require.Equal(t, jsonFields(reflect.TypeOf(config.PoolConfig{})), documented(t, doc, "Pool fields"))
}

// TestConfigExamplesParse loads every YAML example of the config section
// with pkg/config, so no example shows an invalid file.
func TestConfigExamplesParse(t *testing.T) {
	doc := section(t, readDoc(t, "configuration.md"), "The config file")
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(doc, -1)
	require.NotEmpty(t, blocks)
	for i, b := range blocks {
		_, err := config.Parse([]byte(b[1]))
		require.NoError(t, err, "example %d:\n%s", i, b[1])
	}
}

// flagNames returns the names of every flag of fs, sorted.
func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	return names
}

// TestBinaryFlagsDocumented checks each daemon's flag table against the
// flag set its main parses.
func TestBinaryFlagsDocumented(t *testing.T) {
	doc := readDoc(t, "configuration.md")
	for heading, fs := range map[string]*flag.FlagSet{
		"dri-cdi-agent flags": deviceplugin.NewFlagSet(&deviceplugin.RunOptions{}, &logging.Flags{}),
		"dri-cdi-nri flags":   nri.NewFlagSet(&nri.Options{}, &logging.Flags{}),
	} {
		// The binary's own page has the table too.
		page := map[string]string{"dri-cdi-agent": "agent.md", "dri-cdi-nri": "nri.md"}[fs.Name()]
		t.Run(fs.Name(), func(t *testing.T) {
			flags := flagNames(fs)
			require.NotEmpty(t, flags)
			require.Equal(t, flags, documented(t, doc, heading))
			require.Equal(t, flags, documented(t, readDoc(t, page), "Flags"), page)
		})
	}
}

var usageFlag = regexp.MustCompile(`(?m)^  -([A-Za-z][A-Za-z0-9-]*)`)

func TestDoctorFlagsDocumented(t *testing.T) {
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), []string{"help", "doctor"}, cli.Env{Stdout: &out, Stderr: &errOut})
	require.Equal(t, cli.ExitOK, code, errOut.String())
	var flags []string
	for _, m := range usageFlag.FindAllStringSubmatch(out.String(), -1) {
		flags = append(flags, m[1])
	}
	sort.Strings(flags)
	require.NotEmpty(t, flags)
	require.Equal(t, flags, documented(t, readDoc(t, "configuration.md"), "dri-cdi doctor flags"))
}

// TestLinks checks that every relative link of every page, and of the
// READMEs and the changelog, points at a file of the repository.
func TestLinks(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	require.NoError(t, err)
	pages = append(pages, "../README.md", "../deployments/README.md", "../CHANGELOG.md")
	link := regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`)
	for _, p := range pages {
		for _, m := range link.FindAllStringSubmatch(readDoc(t, p), -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			_, err := os.Stat(filepath.Join(filepath.Dir(p), target))
			require.NoError(t, err, "%s links to %s", p, target)
		}
	}
}
