package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// The node's spec dir on a size-limited tmpfs, for the scenarios of a
// full or read-only spec dir. It is mounted before containerd starts:
// remounting under a running containerd breaks its CDI watch. The
// node's teardown unmounts everything under its directory.

// mountSpecTmpfs mounts a tmpfs of size (e.g. "64k") at the node's CDI
// dir.
func (n *Node) mountSpecTmpfs(size string) error {
	if err := unix.Mount("tmpfs", n.CDIDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+size+",mode=0755"); err != nil {
		return fmt.Errorf("mount a %s tmpfs at %s: %w", size, n.CDIDir, err)
	}
	return nil
}

// specFiller is the file FillSpecDir writes: hidden and not .yaml or
// .json, so no CDI cache loads it.
const specFiller = ".e2e-filler"

// FillSpecDir fills the node's spec tmpfs (NodeOptions.SpecDirSize) up to
// the last byte: from now on the agent can neither write nor rename a
// new spec into it, but removing a file still works.
func (n *Node) FillSpecDir() error {
	f, err := os.OpenFile(filepath.Join(n.CDIDir, specFiller), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			return fmt.Errorf("fill %s: %w", n.CDIDir, err)
		}
	}
	// The last pages, a byte at a time.
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return fmt.Errorf("fill %s: %w", n.CDIDir, err)
		}
	}
}

// FreeSpecDir removes what FillSpecDir wrote.
func (n *Node) FreeSpecDir() error {
	return os.Remove(filepath.Join(n.CDIDir, specFiller))
}
