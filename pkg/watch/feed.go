package watch

import (
	"os"
	"sync/atomic"
)

// feed is what DirWatcher and UeventListener share: one goroutine reads
// a non-blocking fd and forwards what it finds on a buffered channel,
// until close closes the fd and waits for that goroutine to end.
type feed[E any] struct {
	file   *os.File
	events chan E
	done   chan struct{} // closed by the reader when it ends
	closed atomic.Bool   // set by close, so the reader does not report its own end as a failure
}

// close stops the reader: its pending read fails, it closes events and
// done, and close returns the error of closing the fd.
func (f *feed[E]) close() error {
	f.closed.Store(true)
	err := f.file.Close()
	<-f.done
	return err
}

// send forwards ev without blocking. Consumers rescan on any event, so
// when the buffer is full one more event adds nothing and is dropped.
func (f *feed[E]) send(ev E) {
	select {
	case f.events <- ev:
	default:
	}
}
