package alloc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTruncate(t *testing.T) {
	require.Equal(t, "short", Truncate("short"))
	at := strings.Repeat("a", 80)
	require.Equal(t, at, Truncate(at), "80 bytes are kept whole")
	require.Equal(t, at+"...", Truncate(at+"bcd"))
}
