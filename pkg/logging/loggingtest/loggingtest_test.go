package loggingtest

import (
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB that keeps what is logged to it.
type recorder struct {
	testing.TB
	lines []string
}

func (r *recorder) Helper() {}

func (r *recorder) Log(args ...any) {
	for _, a := range args {
		r.lines = append(r.lines, a.(string))
	}
}

func TestNew(t *testing.T) {
	r := &recorder{TB: t}
	log := New(r, logrus.InfoLevel)
	log.WithField("card", "0000:00:02.0").Info("advertised")
	log.Debug("not at info")
	require.Len(t, r.lines, 1)
	require.Contains(t, r.lines[0], `msg=advertised card="0000:00:02.0"`)
	require.NotContains(t, r.lines[0], "\n")
}
