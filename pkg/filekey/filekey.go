// Package filekey tells whether a file changed since it was last read,
// from its metadata: the key of a file read for a cache.
package filekey

import (
	"os"
	"syscall"
	"time"
)

// Key is a file's size, modification time and inode. A file rewritten
// in place changes its size or time; one replaced by a rename changes
// its inode.
type Key struct {
	size  int64
	mtime time.Time
	ino   uint64
}

// Of returns the key of fi.
func Of(fi os.FileInfo) Key {
	k := Key{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.ino = st.Ino
	}
	return k
}
