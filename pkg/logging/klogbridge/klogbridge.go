// Package klogbridge routes klog, the logger of client-go, into the
// daemon's logrus logger, so that its lines have the daemon's
// --log-format and --log-level like every other line, instead of klog's
// own text format on stderr.
//
// It is a package of its own, next to pkg/logging and apart from it: only
// dri-cdi-dra links klog, and the agent and NRI binaries, which import
// pkg/logging, must stay without it.
//
// # Example
//
//	klogs, err := klogbridge.Route(log.WithField("component", "client-go"))
//	if err != nil {
//		return err
//	}
//	ctx = klog.NewContext(ctx, klogs)
package klogbridge

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

// Logr returns a logr.Logger that writes through log. Route makes it
// klog's logger.
//
// Verbosity maps to levels the way klog's conventions use it: V(0) is
// Info, V(1) to V(4) (steady-state and debug detail) are Debug, V(5) and
// more (tracing) are Trace. Key-value pairs become fields; a logger's
// names (WithName) are joined with "/" into the field "logger".
func Logr(log *logrus.Entry) logr.Logger {
	return logr.New(&logrusSink{entry: log})
}

// Route makes Logr(log) klog's logger, for klog's functions and for
// loggers taken from a context, and sets klog's verbosity from log's
// level (Debug: 4, Trace: 9, else 0). klog filters its global V(n) calls
// (client-go's) by its own verbosity before a logger sees them, so
// without it those lines would be dropped even at --log-level debug.
// klog's state is global: call it once, before anything logs.
func Route(log *logrus.Entry) (logr.Logger, error) {
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	if err := fs.Set("v", strconv.Itoa(klogVerbosity(log.Logger.GetLevel()))); err != nil {
		return logr.Logger{}, fmt.Errorf("klog verbosity: %w", err)
	}
	l := Logr(log)
	klog.SetLoggerWithOptions(l, klog.ContextualLogger(true))
	return l, nil
}

func klogVerbosity(level logrus.Level) int {
	switch {
	case level >= logrus.TraceLevel:
		return 9
	case level >= logrus.DebugLevel:
		return 4
	}
	return 0
}

type logrusSink struct {
	entry *logrus.Entry
	name  string
}

var _ logr.LogSink = (*logrusSink)(nil)

func (s *logrusSink) Init(logr.RuntimeInfo) {}

func (s *logrusSink) Enabled(v int) bool {
	return s.entry.Logger.IsLevelEnabled(logrusLevel(v))
}

func (s *logrusSink) Info(v int, msg string, kv ...any) {
	s.with(kv).Log(logrusLevel(v), msg)
}

func (s *logrusSink) Error(err error, msg string, kv ...any) {
	s.with(kv).WithError(err).Error(msg)
}

func (s *logrusSink) WithValues(kv ...any) logr.LogSink {
	return &logrusSink{entry: s.entry.WithFields(fields(kv)), name: s.name}
}

func (s *logrusSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return &logrusSink{entry: s.entry, name: name}
}

func (s *logrusSink) with(kv []any) *logrus.Entry {
	e := s.entry
	if s.name != "" {
		e = e.WithField("logger", s.name)
	}
	if len(kv) > 0 {
		e = e.WithFields(fields(kv))
	}
	return e
}

func logrusLevel(v int) logrus.Level {
	switch {
	case v <= 0:
		return logrus.InfoLevel
	case v <= 4:
		return logrus.DebugLevel
	default:
		return logrus.TraceLevel
	}
}

// fields turns logr's alternating keys and values into logrus fields. A
// key without a value gets "(MISSING)", as logr's own sinks write it; a
// value that is a logr.Marshaler is logged as what it marshals to.
func fields(kv []any) logrus.Fields {
	f := make(logrus.Fields, (len(kv)+1)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			k = fmt.Sprint(kv[i])
		}
		k = strings.TrimSpace(k)
		if i+1 == len(kv) {
			f[k] = "(MISSING)"
			break
		}
		v := kv[i+1]
		if m, ok := v.(logr.Marshaler); ok {
			v = m.MarshalLog()
		}
		f[k] = v
	}
	return f
}
