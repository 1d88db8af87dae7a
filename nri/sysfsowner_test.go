package nri

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/require"
)

// Without dev/char in --sysfs-root the owner check is off, and the
// plugin says so (log; Run adds it to /readyz); with it, it is on.
func TestSysfsOwnerNeedsDevChar(t *testing.T) {
	log, hook := logtest.NewNullLogger()
	root := t.TempDir()
	require.Nil(t, sysfsOwner(root, logrus.NewEntry(log)))
	require.Len(t, hook.AllEntries(), 1)
	require.Equal(t, noDevCharWarning(root), hook.LastEntry().Message)
	require.Contains(t, noDevCharWarning(root), "has no dev/char")

	require.NoError(t, os.MkdirAll(filepath.Join(root, "dev", "char"), 0o755))
	require.NoError(t, os.Symlink("../../devices/pci0000:00/0000:00:02.0/drm/renderD128", filepath.Join(root, "dev", "char", "226:128")))
	owner := sysfsOwner(root, logrus.NewEntry(log))
	require.NotNil(t, owner)
	id, err := owner(226, 128)
	require.NoError(t, err)
	require.Equal(t, "0000:00:02.0", id)
}
