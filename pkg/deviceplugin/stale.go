package deviceplugin

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/dpapi"
)

// SocketPrefix starts the name of every socket the Manager serves in the
// kubelet dir; no other plugin's socket is ever touched.
const SocketPrefix = dpapi.SocketPrefix

// staleDialTimeout bounds the check whether a socket is served.
const staleDialTimeout = time.Second

// RemoveStaleSockets removes the sockets a crashed agent left in the
// kubelet dir: files named SocketPrefix*.sock that are unix sockets
// nobody serves (connecting is refused). A served socket, such as
// another agent's during a rolling update, and every other file are left
// alone. It returns the removed paths; errors name the file.
func (m *Manager) RemoveStaleSockets() ([]string, error) {
	entries, err := os.ReadDir(m.opts.KubeletDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list kubelet dir %s: %w", m.opts.KubeletDir, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, SocketPrefix) || !strings.HasSuffix(name, ".sock") || e.Type()&fs.ModeSocket == 0 {
			continue
		}
		p := filepath.Join(m.opts.KubeletDir, name)
		if !refused(p) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove stale socket %s: %w", p, err))
			continue
		}
		removed = append(removed, p)
		m.log.WithField("socket", name).Info("removed a socket a previous agent left behind")
	}
	return removed, errors.Join(errs...)
}

// refused reports whether connecting to the unix socket at p is refused:
// no process listens on it any more.
func refused(p string) bool {
	c, err := net.DialTimeout("unix", p, staleDialTimeout)
	if err == nil {
		_ = c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
