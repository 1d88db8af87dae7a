package klogbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
)

// jsonLines returns a logger at level writing JSON lines, and a function
// that decodes what it wrote.
func jsonLines(t *testing.T, level logrus.Level) (*logrus.Entry, func() []map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	l := logrus.New()
	l.SetOutput(&buf)
	l.SetFormatter(&logrus.JSONFormatter{})
	l.SetLevel(level)
	return logrus.NewEntry(l).WithField("component", "client-go"), func() []map[string]any {
		var out []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if line == "" {
				continue
			}
			m := map[string]any{}
			require.NoError(t, json.Unmarshal([]byte(line), &m), line)
			out = append(out, m)
		}
		buf.Reset()
		return out
	}
}

type marshaled struct{}

func (marshaled) MarshalLog() any { return "as marshaled" }

func TestLogr(t *testing.T) {
	entry, lines := jsonLines(t, logrus.InfoLevel)
	log := Logr(entry)

	log.Info("registered", "plugin", "dri-cdi.dev", "count", 2)
	require.Equal(t, []map[string]any{{
		"level": "info", "msg": "registered", "component": "client-go", "plugin": "dri-cdi.dev", "count": float64(2), "time": "",
	}}, withoutTime(lines()))

	// Verbosity above 0 is Debug (1-4) or Trace (5+): not written at info.
	require.True(t, log.V(0).Enabled())
	require.False(t, log.V(1).Enabled())
	log.V(4).Info("detail")
	log.V(5).Info("trace")
	require.Empty(t, lines())

	log.WithName("health").WithName("stream").WithValues("pool", "node-a").Error(errors.New("boom"), "stream failed", "odd")
	got := withoutTime(lines())
	require.Equal(t, []map[string]any{{
		"level": "error", "msg": "stream failed", "component": "client-go", "logger": "health/stream", "pool": "node-a",
		"error": "boom", "odd": "(MISSING)", "time": "",
	}}, got)

	log.Info("object", "claim", marshaled{}, 7, "non-string key")
	obj := lines()[0]
	require.Equal(t, "as marshaled", obj["claim"])
	require.Equal(t, "non-string key", obj["7"])

	debug, dlines := jsonLines(t, logrus.TraceLevel)
	dlog := Logr(debug)
	dlog.V(2).Info("steady")
	dlog.V(6).Info("tracing")
	levels := []any{}
	for _, l := range dlines() {
		levels = append(levels, l["level"])
	}
	require.Equal(t, []any{"debug", "trace"}, levels)
}

// TestRoute checks the route dri-cdi-dra sets up: klog's global and
// contextual logging end in the logrus logger, and klog's own verbosity
// follows the logger's level, so client-go's klog.V(n) lines reach it.
func TestRoute(t *testing.T) {
	for _, tc := range []struct {
		level logrus.Level
		want  []string // messages that arrive, in order
	}{
		{logrus.InfoLevel, []string{"from klog", "from contextual"}},
		{logrus.DebugLevel, []string{"from klog", "from contextual", "klog V(2)", "klog V(4)", "contextual V(2)"}},
		{logrus.TraceLevel, []string{"from klog", "from contextual", "klog V(2)", "klog V(4)", "klog V(6)", "contextual V(2)", "contextual V(6)"}},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			entry, lines := jsonLines(t, tc.level)
			_, err := Route(entry)
			require.NoError(t, err)
			t.Cleanup(func() {
				klog.ClearLogger()
				var fs flag.FlagSet
				klog.InitFlags(&fs)
				require.NoError(t, fs.Set("v", "0"))
			})

			klog.InfoS("from klog", "node", "node-a")
			contextual := klog.FromContext(context.Background()).WithName("kubeletplugin")
			contextual.Info("from contextual", "driver", "dri-cdi.dev")
			for _, v := range []klog.Level{2, 4, 6} {
				klog.V(v).InfoS(fmt.Sprintf("klog V(%d)", v))
			}
			contextual.V(2).Info("contextual V(2)")
			contextual.V(6).Info("contextual V(6)")

			got := withoutTime(lines())
			var msgs []string
			for _, l := range got {
				msgs = append(msgs, l["msg"].(string))
			}
			require.Equal(t, tc.want, msgs)
			require.Equal(t, "node-a", got[0]["node"])
			require.Equal(t, "dri-cdi.dev", got[1]["driver"])
			require.Equal(t, "kubeletplugin", got[1]["logger"])
		})
	}
}

func withoutTime(lines []map[string]any) []map[string]any {
	for _, l := range lines {
		l["time"] = ""
	}
	return lines
}
