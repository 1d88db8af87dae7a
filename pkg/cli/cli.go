package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/pkg/flagenv"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
)

// Exit codes of Run.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// Env is what a command runs with. Tests fill it with buffers and a fake
// environment.
type Env struct {
	// Stdout receives the command's result, Stderr warnings and errors.
	Stdout, Stderr io.Writer
	// LookupEnv reads the environment (os.LookupEnv in main).
	LookupEnv func(string) (string, bool)
	// Log is set by Run from the global flags; it writes to Stderr.
	Log *logrus.Entry
}

// Command is one entry of a dispatcher table.
type Command struct {
	// Name is the word on the command line.
	Name string
	// Summary is the one-line description in the command list.
	Summary string
	// Run runs the command with the arguments after its name. It parses
	// its own flags (see newFlags), so "-h" prints its usage.
	Run func(ctx context.Context, env *Env, args []string) error
}

// errHelp reports that usage was printed on request: exit 0.
var errHelp = errors.New("help requested")

// usageError is a command line mistake: Run prints the message and the
// usage text, and exits with ExitUsage.
type usageError struct {
	msg   string
	usage string
}

func (e *usageError) Error() string { return e.msg }

// Run runs the dri-cdi command line args (without the program name) and
// returns the process exit code: ExitOK, ExitError when the command
// failed, ExitUsage for a command line mistake.
func Run(ctx context.Context, args []string, env Env) int {
	if env.LookupEnv == nil {
		env.LookupEnv = func(string) (string, bool) { return "", false }
	}
	f := newFlags("dri-cdi", "[global flags] <command> [flags]", rootHelp)
	logFormat := f.String("log-format", "text", "log format: text or json")
	logLevel := f.String("log-level", "info", "log level: "+strings.Join(logging.Levels, ", "))
	f.finish()
	f.footer = commandList(commands()) + "\nRun \"dri-cdi help <command>\" for the flags of a command.\n"
	err := f.parse(&env, args, true)
	if err == nil {
		var log *logrus.Logger
		log, err = logging.New(env.Stderr, *logFormat, *logLevel)
		if err != nil {
			err = &usageError{msg: err.Error(), usage: f.usage()}
		} else {
			env.Log = logrus.NewEntry(log).WithField("component", "dri-cdi")
			err = dispatch(ctx, &env, "dri-cdi", f.usage(), commands(), f.Args())
		}
	}
	return exitCode(&env, err)
}

const rootHelp = `dri-cdi shows the DRM GPUs of this node, the CDI specs that make them
usable from unprivileged pods, and what each pod does with them.`

func exitCode(env *Env, err error) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(env.Stderr, "dri-cdi: %s\n\n%s", ue.msg, ue.usage)
		return ExitUsage
	default:
		fmt.Fprintf(env.Stderr, "dri-cdi: %v\n", err)
		return ExitError
	}
}

// dispatch runs the command named by args[0] from cmds. "help [name
// ...]" and "-h" print usage; no or an unknown name is a usage error.
func dispatch(ctx context.Context, env *Env, prefix, usage string, cmds []*Command, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "missing command", usage: usage}
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		fmt.Fprint(env.Stdout, usage)
		return errHelp
	case "help":
		if len(rest) == 0 {
			fmt.Fprint(env.Stdout, usage)
			return errHelp
		}
		// "help <name> [sub...]" is "<name> [sub...] -h".
		name, rest = rest[0], append(append([]string(nil), rest[1:]...), "-h")
	}
	for _, c := range cmds {
		if c.Name == name {
			return c.Run(ctx, env, rest)
		}
	}
	return &usageError{msg: fmt.Sprintf("unknown command %q for %q", name, prefix), usage: usage}
}

// commandList formats the command list of a usage text.
func commandList(cmds []*Command) string {
	var b strings.Builder
	b.WriteString("\nCommands:\n")
	width := len("help")
	for _, c := range cmds {
		width = max(width, len(c.Name))
	}
	for _, c := range cmds {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.Name, c.Summary)
	}
	fmt.Fprintf(&b, "  %-*s  %s\n", width, "help", "Show the usage of a command")
	return b.String()
}

// flags is a flag.FlagSet with the conventions of every dri-cdi command:
// each flag is also an environment variable, "-h" prints the usage to
// stdout, and a short alias shares its long flag's variable.
type flags struct {
	*flag.FlagSet
	name, synopsis, help string
	footer               string
	aliases              map[string]string // short -> long
	// formats are the values -output takes (output), the default first.
	formats []string
	format  *string
}

func newFlags(name, synopsis, help string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flags{FlagSet: fs, name: name, synopsis: synopsis, help: help, aliases: map[string]string{}}
}

// alias makes -short set the same value as -long.
func (f *flags) alias(short, long string) {
	fl := f.Lookup(long)
	f.Var(fl.Value, short, "")
	f.aliases[short] = long
}

// output adds -output (and -o) with the given formats, the first the
// default; parse rejects any other value.
func (f *flags) output(formats ...string) *string {
	help := strings.Join(formats[:len(formats)-1], ", ") + " or " + formats[len(formats)-1]
	f.format = f.String("output", formats[0], "output format: "+help)
	f.formats = formats
	f.alias("o", "output")
	return f.format
}

// finish adds the environment variable names to the help texts. Call it
// after defining the flags.
func (f *flags) finish() {
	flagenv.Usage(f.FlagSet, flagenv.Prefix)
	for short, long := range f.aliases {
		f.Lookup(short).Usage = "short for -" + long
	}
}

func (f *flags) usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s %s\n\n%s\n", f.name, f.synopsis, f.help)
	var any bool
	f.VisitAll(func(*flag.Flag) { any = true })
	if any {
		b.WriteString("\nFlags:\n")
		f.SetOutput(&b)
		f.PrintDefaults()
		f.SetOutput(io.Discard)
	}
	b.WriteString(f.footer)
	return b.String()
}

// parse parses args, prints the usage on -h (errHelp), applies the
// environment to flags not given, and rejects positional arguments unless
// allowArgs.
func (f *flags) parse(env *Env, args []string, allowArgs bool) error {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(env.Stdout, f.usage())
			return errHelp
		}
		return &usageError{msg: err.Error(), usage: f.usage()}
	}
	if !allowArgs && f.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q", f.Arg(0)), usage: f.usage()}
	}
	given := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	hidden := map[string]bool{}
	for short, long := range f.aliases {
		// An alias has no variable of its own, and a value given through
		// either spelling beats the long flag's variable.
		hidden[flagenv.EnvName(flagenv.Prefix, short)] = true
		if given[short] {
			hidden[flagenv.EnvName(flagenv.Prefix, long)] = true
		}
	}
	lookup := func(name string) (string, bool) {
		if hidden[name] {
			return "", false
		}
		return env.LookupEnv(name)
	}
	if err := flagenv.Apply(f.FlagSet, flagenv.Prefix, lookup); err != nil {
		return &usageError{msg: err.Error(), usage: f.usage()}
	}
	if f.format != nil {
		return oneOf(f, "output", *f.format, f.formats...)
	}
	return nil
}

// dirList is a repeatable directory flag; like PATH, a colon also
// separates directories, so one environment variable can list several.
// The first value given replaces the defaults.
type dirList struct {
	dirs []string
	set  bool
}

func (l *dirList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.dirs, string(filepath.ListSeparator))
}

func (l *dirList) Set(v string) error {
	if !l.set {
		l.dirs, l.set = nil, true
	}
	for _, d := range filepath.SplitList(v) {
		if d = strings.TrimSpace(d); d != "" {
			l.dirs = append(l.dirs, d)
		}
	}
	return nil
}

// oneOf returns a usage error unless v is one of the allowed values.
func oneOf(f *flags, flagName, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return &usageError{
		msg:   fmt.Sprintf("invalid value %q for -%s: want %s", v, flagName, strings.Join(allowed, ", ")),
		usage: f.usage(),
	}
}

// warnf prints one warning line on stderr.
func (e *Env) warnf(format string, a ...any) {
	fmt.Fprintf(e.Stderr, "warning: "+format+"\n", a...)
}
