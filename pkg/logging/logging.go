// Package logging builds the process logger. Only mains call it; every
// component receives a *logrus.Entry with its own fields (Discard when
// its caller gives none). Its subpackage klogbridge routes klog
// (client-go, the Kubernetes helpers) into that logger, for the one
// daemon that links klog.
package logging

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
)

// Levels are the log levels every binary accepts, from the fewest lines
// to the most. The Helm chart's values schema and docs/configuration.md
// list the same (docs/docs_test.go checks both).
var Levels = []string{"error", "warn", "info", "debug", "trace"}

// New returns a logger writing to w in format "text" or "json" at one of
// Levels ("" is info).
func New(w io.Writer, format, level string) (*logrus.Logger, error) {
	l := logrus.New()
	l.SetOutput(w)
	switch format {
	case "", "text":
		l.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, DisableColors: true})
	case "json":
		l.SetFormatter(&logrus.JSONFormatter{})
	default:
		return nil, fmt.Errorf("invalid log format %q: want text or json", format)
	}
	if level == "" {
		level = "info"
	}
	if !slices.Contains(Levels, level) {
		return nil, fmt.Errorf("invalid log level %q: want one of %s", level, strings.Join(Levels, ", "))
	}
	lv, err := logrus.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("invalid log level %q: %w", level, err)
	}
	l.SetLevel(lv)
	return l, nil
}

// Flags are the logging flags the daemons share, --log-format and
// --log-level, with their defaults text and info.
type Flags struct {
	Format, Level string
}

// Register adds --log-format and --log-level to fs, writing into f.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Format, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.Level, "log-level", "info", "log level: "+strings.Join(Levels, ", "))
}

// New returns the logger the flags ask for, writing to w.
func (f Flags) New(w io.Writer) (*logrus.Logger, error) { return New(w, f.Format, f.Level) }

// Discard is a logger that writes nothing: the default of a component
// whose options name no logger.
func Discard() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}
