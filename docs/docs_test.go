package docs

import (
	"bytes"
	"context"
	"encoding/json"
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
	"github.com/dri-cdi/dri-cdi/pkg/dra"
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
		"dri-cdi-dra flags":   dra.NewFlagSet(&dra.RunOptions{}, &logging.Flags{}),
	} {
		// The binary's own page has the table too.
		page := map[string]string{"dri-cdi-agent": "agent.md", "dri-cdi-nri": "nri.md", "dri-cdi-dra": "dra-plugin.md"}[fs.Name()]
		t.Run(fs.Name(), func(t *testing.T) {
			flags := flagNames(fs)
			require.NotEmpty(t, flags)
			require.Equal(t, flags, documented(t, doc, heading))
			require.Equal(t, flags, documented(t, readDoc(t, page), "Flags"), page)
		})
	}
}

var usageFlag = regexp.MustCompile(`(?m)^  -([A-Za-z][A-Za-z0-9-]*)`)
var usageCommand = regexp.MustCompile(`(?m)^  ([a-z][a-z-]*)  +\S`)

// cliHelp returns `dri-cdi help <path...>`.
func cliHelp(t *testing.T, path ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), append([]string{"help"}, path...), cli.Env{Stdout: &out, Stderr: &errOut})
	require.Equal(t, cli.ExitOK, code, errOut.String())
	return out.String()
}

// usageFlags returns the flags a usage text lists, sorted.
func usageFlags(usage string) []string {
	var flags []string
	for _, m := range usageFlag.FindAllStringSubmatch(usage, -1) {
		flags = append(flags, m[1])
	}
	sort.Strings(flags)
	return flags
}

// cliCommands walks `dri-cdi help` and returns every command that runs
// something ("doctor", "cdi generate", ...), with its usage text;
// commands that only dispatch ("cdi") are walked into.
func cliCommands(t *testing.T, path ...string) map[string]string {
	t.Helper()
	usage := cliHelp(t, path...)
	_, list, found := strings.Cut(usage, "\nCommands:\n")
	if !found {
		return map[string]string{strings.Join(path, " "): usage}
	}
	list, _, _ = strings.Cut(list, "\n\n")
	out := map[string]string{}
	for _, m := range usageCommand.FindAllStringSubmatch(list, -1) {
		if m[1] == "help" {
			continue
		}
		for k, v := range cliCommands(t, append(append([]string(nil), path...), m[1])...) {
			out[k] = v
		}
	}
	return out
}

// TestCLIFlagsDocumented checks configuration.md's table of every dri-cdi
// command's flags, and of its global flags, against the command's usage,
// and that pkg/cli's package doc lists every command.
func TestCLIFlagsDocumented(t *testing.T) {
	doc := readDoc(t, "configuration.md")
	root := cliHelp(t)
	global, _, _ := strings.Cut(root, "\nCommands:\n")
	require.NotEmpty(t, usageFlags(global))
	require.Equal(t, usageFlags(global), documented(t, doc, "dri-cdi global flags"))

	pkgDoc := readDoc(t, "../pkg/cli/doc.go")
	commands := cliCommands(t)
	require.Contains(t, commands, "doctor")
	require.Contains(t, commands, "cdi generate")
	for name, usage := range commands {
		t.Run(name, func(t *testing.T) {
			require.Contains(t, pkgDoc, "//\tdri-cdi "+name+" ", "pkg/cli/doc.go lists dri-cdi %s", name)
			flags := usageFlags(usage)
			if len(flags) == 0 {
				require.Contains(t, section(t, doc, "dri-cdi commands without flags"), "`dri-cdi "+name+"`")
				return
			}
			require.Equal(t, flags, documented(t, doc, "dri-cdi "+name+" flags"))
		})
	}
}

// TestLogLevelsDocumented: the levels configuration.md lists for
// --log-level, and those the Helm values schema allows, are the ones
// pkg/logging accepts.
func TestLogLevelsDocumented(t *testing.T) {
	doc := readDoc(t, "configuration.md")
	rows := regexp.MustCompile("(?m)^\\| `--log-level` \\|.*$").FindAllString(doc, -1)
	require.NotEmpty(t, rows)
	word := regexp.MustCompile("`([a-z]+)`")
	for _, row := range rows {
		cells := strings.Split(row, "|")
		var levels []string
		for _, m := range word.FindAllStringSubmatch(cells[len(cells)-2], -1) {
			levels = append(levels, m[1])
		}
		require.Equal(t, logging.Levels, levels, "configuration.md: %s", row)
	}

	var schema struct {
		Properties struct {
			Logging struct {
				Properties struct {
					Level struct {
						Enum []string `json:"enum"`
					} `json:"level"`
				} `json:"properties"`
			} `json:"logging"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal([]byte(readDoc(t, "../deployments/helm/dri-cdi/values.schema.json")), &schema))
	require.Equal(t, logging.Levels, schema.Properties.Logging.Properties.Level.Enum, "the Helm values schema's logging.level")
}

// daemons are the binaries whose main runs pkg/daemon.Main, which sets
// the GC default.
func daemons(t *testing.T) []string {
	t.Helper()
	mains, err := filepath.Glob("../cmd/*/main.go")
	require.NoError(t, err)
	var out []string
	for _, m := range mains {
		if strings.Contains(readDoc(t, m), "daemon.Main(") {
			out = append(out, filepath.Base(filepath.Dir(m)))
		}
	}
	require.NotEmpty(t, out)
	return out
}

// TestGCDefaultDocumented: configuration.md names every daemon that runs
// at GOGC=50, and counts them right.
func TestGCDefaultDocumented(t *testing.T) {
	doc := readDoc(t, "configuration.md")
	i := strings.Index(doc, "`GOGC=50`")
	require.Positive(t, i, "configuration.md documents the GOGC default")
	para := doc[strings.LastIndex(doc[:i], "\n\n"):]
	para, _, _ = strings.Cut(para[2:], "\n\n")
	for _, d := range daemons(t) {
		require.Contains(t, para, "`"+d+"`", "the GOGC paragraph names %s", d)
	}
	require.NotRegexp(t, `(?i)\bboth\b`, para)
}

var numbers = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}

// TestBinaryCountDocumented: wherever the docs count the binaries ("the
// three binaries"), the count is the number of commands under cmd/.
func TestBinaryCountDocumented(t *testing.T) {
	mains, err := filepath.Glob("../cmd/*/main.go")
	require.NoError(t, err)
	pages, err := filepath.Glob("*.md")
	require.NoError(t, err)
	pages = append(pages, "../README.md", "../deployments/README.md")
	count := regexp.MustCompile(`(?i)\b(one|two|three|four|five|six) (?:static )?binaries`)
	seen := 0
	for _, p := range pages {
		for _, m := range count.FindAllStringSubmatch(readDoc(t, p), -1) {
			seen++
			require.Equal(t, len(mains), numbers[strings.ToLower(m[1])], "%s: %q", p, m[0])
		}
	}
	require.Positive(t, seen)
}

// TestHelmInstallLabelsNamespace: every shell block that runs `helm
// install` into dri-cdi first creates and labels the namespace, since
// the chart creates none and Pod Security refuses the pods without the
// label.
func TestHelmInstallLabelsNamespace(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	require.NoError(t, err)
	pages = append(pages, "../README.md", "../deployments/README.md")
	block := regexp.MustCompile("(?s)```sh\n(.*?)```")
	seen := 0
	for _, p := range pages {
		for _, b := range block.FindAllStringSubmatch(readDoc(t, p), -1) {
			i := strings.Index(b[1], "helm install ")
			if i < 0 || strings.Contains(b[1][i:], "--create-namespace") {
				continue
			}
			seen++
			before := b[1][:i]
			require.Contains(t, before, "kubectl create namespace dri-cdi", "%s: a helm install without creating the namespace:\n%s", p, b[1])
			require.Contains(t, before, "kubectl label namespace dri-cdi pod-security.kubernetes.io/enforce=privileged", "%s: a helm install without the namespace's label:\n%s", p, b[1])
		}
	}
	require.Positive(t, seen)
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

// TestDebugPodHasAnAlternative: every page that shows the privileged
// `kubectl debug` path to the doctor also points at the path that works
// where policy refuses privileged pods.
func TestDebugPodHasAnAlternative(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	require.NoError(t, err)
	pages = append(pages, "../README.md")
	seen := 0
	for _, p := range pages {
		doc := readDoc(t, p)
		if !strings.Contains(doc, "kubectl debug node/") || p == "e2e.md" || strings.Contains(doc, "\n## Check a node without a debug pod\n") {
			continue
		}
		seen++
		require.Contains(t, doc, "#check-a-node-without-a-debug-pod", "%s shows kubectl debug without the path that needs no privileged pod", p)
	}
	require.Positive(t, seen)
}
