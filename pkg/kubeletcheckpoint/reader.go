package kubeletcheckpoint

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/filekey"
)

// DefaultTimeout bounds one read of the checkpoint.
const DefaultTimeout = 500 * time.Millisecond

// Reader reads a checkpoint file on demand and keeps the last parse until
// the file's identity, size or modification time changes. It is safe for
// concurrent use.
type Reader struct {
	path    string
	timeout time.Duration

	mu     sync.Mutex
	key    filekey.Key
	cached *Checkpoint
}

// NewReader returns a Reader of the checkpoint at path whose reads take at
// most timeout (DefaultTimeout when <= 0).
func NewReader(path string, timeout time.Duration) *Reader {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Reader{path: path, timeout: timeout}
}

// Path returns the checkpoint's path.
func (r *Reader) Path() string { return r.path }

// ContainerDevices returns what the kubelet allocated to container of the
// pod with UID podUID, by resource name. An error wrapping ErrNotAllocated
// means the kubelet allocated it nothing; any other error (a missing or
// malformed file, the deadline) means the checkpoint could not be read.
func (r *Reader) ContainerDevices(ctx context.Context, podUID, container string) (map[string][]string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	type result struct {
		cp  *Checkpoint
		err error
	}
	// The read runs aside so that a stuck filesystem cannot hold the
	// caller past its deadline.
	done := make(chan result, 1)
	go func() {
		cp, err := r.load()
		done <- result{cp, err}
	}()
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("reading kubelet checkpoint %s: %w", r.path, ctx.Err())
	case res := <-done:
		if res.err != nil {
			return nil, res.err
		}
		return res.cp.ContainerDevices(podUID, container)
	}
}

// load returns the cached parse, or reads and parses the file when it
// changed.
func (r *Reader) load() (*Checkpoint, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fi, err := os.Stat(r.path)
	if err != nil {
		return nil, fmt.Errorf("kubelet checkpoint %s: %w", r.path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrInvalid, r.path)
	}
	key := filekey.Of(fi)
	if r.cached != nil && key == r.key {
		return r.cached, nil
	}
	cp, err := ReadFile(r.path)
	if err != nil {
		return nil, err
	}
	// The key is the stat taken before the read: a file replaced in
	// between is read again next time.
	r.key, r.cached = key, cp
	return cp, nil
}

// ReadFile reads and parses the checkpoint at path, at most MaxSize bytes
// of it. Errors name the file; a missing file is an error wrapping
// fs.ErrNotExist.
func ReadFile(path string) (*Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kubelet checkpoint %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("kubelet checkpoint %s: %w", path, err)
	}
	cp, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("kubelet checkpoint %s: %w", path, err)
	}
	return cp, nil
}
