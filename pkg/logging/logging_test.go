package logging

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNew(t *testing.T) {
	var buf bytes.Buffer
	l, err := New(&buf, "json", "debug")
	require.NoError(t, err)
	l.WithField("component", "t").Debug("hello")
	require.Contains(t, buf.String(), `"component":"t"`)
	require.Contains(t, buf.String(), `"msg":"hello"`)

	_, err = New(&buf, "xml", "info")
	require.ErrorContains(t, err, `invalid log format "xml"`)
	_, err = New(&buf, "text", "loud")
	require.ErrorContains(t, err, `invalid log level "loud": want one of error, warn, info, debug, trace`)
	// logrus knows these too, but no binary documents or needs them.
	for _, level := range []string{"panic", "fatal", "warning"} {
		_, err = New(&buf, "text", level)
		require.ErrorContains(t, err, `invalid log level "`+level+`"`)
	}
	for _, level := range Levels {
		_, err = New(&buf, "text", level)
		require.NoError(t, err, level)
	}
}
