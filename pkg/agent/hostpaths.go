package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"
)

// hostPaths checks the host directories the agent runs without but does
// nothing useful without: <sysfs>/class/drm, which the kernel creates when
// a DRM driver loads, and the directories the backend needs
// (Backend.HostDirs: the kubelet's device plugin or plugin registration
// directory). None is an error: a node without a GPU is normal, and the
// kubelet may create its directory later. But an agent that is Ready and
// logs only "first sync done cards=[]" hides a wrong --sysfs-root or
// kubelet directory, so each missing directory is logged as a warning
// when it goes missing, and /readyz names it.
type hostPaths struct {
	sysfs string
	dirs  []HostDir
	log   *logrus.Entry

	mu       sync.Mutex
	warnings []string
}

func newHostPaths(sysfs string, dirs []HostDir, log *logrus.Entry) *hostPaths {
	return &hostPaths{sysfs: sysfs, dirs: dirs, log: log}
}

// check looks at the directories again, logs what changed since the last
// check and keeps the warnings for Warnings.
func (h *hostPaths) check() {
	var now []string
	drmClass := filepath.Join(h.sysfs, "class", "drm")
	if err := isDir(drmClass); err != nil {
		now = append(now, fmt.Sprintf("%s: %v: no DRM driver is loaded on this node, or --sysfs-root is not the host's sysfs; nothing is advertised until a GPU driver loads", drmClass, err))
	}
	for _, d := range h.dirs {
		if err := isDir(d.Path); err != nil {
			now = append(now, fmt.Sprintf("%s: %v: %s", d.Path, err, d.Missing))
		}
	}

	h.mu.Lock()
	before := h.warnings
	h.warnings = now
	h.mu.Unlock()
	for _, w := range now {
		if !slices.Contains(before, w) {
			h.log.Warn(w)
		}
	}
	for _, w := range before {
		if !slices.Contains(now, w) {
			h.log.WithField("was", w).Info("host path is back")
		}
	}
}

// Warnings returns the warnings of the last check.
func (h *hostPaths) Warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.warnings)
}

func isDir(p string) error {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("does not exist")
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("is not a directory (%s)", strings.TrimSpace(fi.Mode().Type().String()))
	}
	return nil
}
