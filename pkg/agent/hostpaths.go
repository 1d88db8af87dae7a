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
// a DRM driver loads, and the kubelet's device plugin directory. Neither
// is an error: a node without a GPU is normal, and the kubelet may create
// its directory later. But an agent that is Ready and logs only
// "first sync done resources=[]" hides a wrong --sysfs-root or
// --kubelet-dir, so each missing directory is logged as a warning when it
// goes missing, and /readyz names it.
type hostPaths struct {
	sysfs, kubeletDir string
	// kubeletWhat says what a missing kubeletDir means; empty is the
	// device plugin's text.
	kubeletWhat string
	log         *logrus.Entry

	mu       sync.Mutex
	warnings []string
}

func newHostPaths(sysfs, kubeletDir string, log *logrus.Entry) *hostPaths {
	return &hostPaths{sysfs: sysfs, kubeletDir: kubeletDir, log: log}
}

// check looks at the directories again, logs what changed since the last
// check and keeps the warnings for Warnings.
func (h *hostPaths) check() {
	var now []string
	drmClass := filepath.Join(h.sysfs, "class", "drm")
	if err := isDir(drmClass); err != nil {
		now = append(now, fmt.Sprintf("%s: %v: no DRM driver is loaded on this node, or --sysfs-root is not the host's sysfs; nothing is advertised until a GPU driver loads", drmClass, err))
	}
	if err := isDir(h.kubeletDir); err != nil && h.kubeletWhat != "" {
		now = append(now, fmt.Sprintf("%s: %v: %s", h.kubeletDir, err, h.kubeletWhat))
	} else if err != nil {
		now = append(now, fmt.Sprintf("%s: %v: the kubelet's device plugin directory (--kubelet-dir) is missing, so no resource can be registered; the kubelet creates it when it starts", h.kubeletDir, err))
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
