package docs

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/cli"
	"github.com/dri-cdi/dri-cdi/pkg/config"
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

// mainFlags returns the flags a command's main.go defines on its
// FlagSet: the name argument of every fs.XxxVar(p, name, ...) and
// fs.Xxx(name, ...) call.
func mainFlags(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	require.NoError(t, err)
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "fs" {
			return true
		}
		switch sel.Sel.Name {
		case "String", "Bool", "Int", "Uint", "Duration", "Float64", "Int64", "Uint64":
			names = append(names, literal(t, call.Args[0]))
		case "StringVar", "BoolVar", "IntVar", "UintVar", "DurationVar", "Float64Var", "Int64Var", "Uint64Var", "Var":
			names = append(names, literal(t, call.Args[1]))
		}
		return true
	})
	sort.Strings(names)
	return names
}

func literal(t *testing.T, e ast.Expr) string {
	t.Helper()
	lit, ok := e.(*ast.BasicLit)
	require.True(t, ok && lit.Kind == token.STRING, "flag name is not a string literal")
	s, err := strconv.Unquote(lit.Value)
	require.NoError(t, err)
	return s
}

func TestBinaryFlagsDocumented(t *testing.T) {
	doc := readDoc(t, "configuration.md")
	for bin, heading := range map[string]string{
		"dri-cdi-agent": "dri-cdi-agent flags",
		"dri-cdi-nri":   "dri-cdi-nri flags",
	} {
		t.Run(bin, func(t *testing.T) {
			main := filepath.Join("..", "cmd", bin, "main.go")
			if _, err := os.Stat(main); os.IsNotExist(err) {
				t.Skipf("%s does not exist in this tree", main)
			}
			flags := mainFlags(t, main)
			require.NotEmpty(t, flags)
			require.Equal(t, flags, documented(t, doc, heading))
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
