// Package loggingtest gives tests a logger whose lines go to the test's
// own log, so they are shown next to the test that wrote them, and only
// when it fails or runs with -v.
package loggingtest

import (
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

// New returns a logger at level that writes every line through t.Log.
func New(t testing.TB, level logrus.Level) *logrus.Entry {
	l := logrus.New()
	l.SetLevel(level)
	l.SetOutput(writer{t})
	return logrus.NewEntry(l)
}

type writer struct{ t testing.TB }

func (w writer) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
