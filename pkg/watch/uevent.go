package watch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/pkg/alloc"
)

// UeventSubsystems are the subsystems whose uevents can change the DRM
// inventory: DRM and accel nodes, the PCI, platform and virtio parents
// whose drivers bind and unbind, and the subsystems of companion nodes
// (a codec driver that loads after the GPU's).
var UeventSubsystems = []string{"drm", "accel", "pci", "platform", "virtio", "video4linux", "media", "dma_heap", "kfd"}

// Uevent is one kernel uevent.
type Uevent struct {
	// Action is add, remove, change, move, online, offline, bind or unbind.
	Action string
	// DevPath is the device's path below /sys.
	DevPath string
	// Subsystem is the SUBSYSTEM variable (drm, pci, ...).
	Subsystem string
	// Env holds every KEY=VALUE variable of the event.
	Env map[string]string
}

// ErrBadUevent is wrapped by every ParseUevent error.
var ErrBadUevent = errors.New("malformed uevent")

// ParseUevent decodes a kernel uevent datagram:
// "action@devpath\0KEY=VALUE\0...". Messages from udev (which start with
// "libudev") are rejected; the agent listens to the kernel only.
func ParseUevent(b []byte) (Uevent, error) {
	parts := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
	if len(parts) == 0 || len(parts[0]) == 0 {
		return Uevent{}, fmt.Errorf("%w: empty", ErrBadUevent)
	}
	head := string(parts[0])
	if strings.HasPrefix(head, "libudev") {
		return Uevent{}, fmt.Errorf("%w: udev message, not a kernel uevent", ErrBadUevent)
	}
	action, devpath, ok := strings.Cut(head, "@")
	if !ok || action == "" || devpath == "" {
		return Uevent{}, fmt.Errorf("%w: header %q is not action@devpath", ErrBadUevent, alloc.Truncate(head))
	}
	ev := Uevent{Action: action, DevPath: devpath, Env: make(map[string]string, len(parts)-1)}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(string(p), "=")
		if !ok || k == "" {
			return Uevent{}, fmt.Errorf("%w: variable %q is not KEY=VALUE", ErrBadUevent, alloc.Truncate(string(p)))
		}
		ev.Env[k] = v
	}
	if a := ev.Env["ACTION"]; a != "" && a != action {
		return Uevent{}, fmt.Errorf("%w: header action %q but ACTION=%q", ErrBadUevent, alloc.Truncate(action), alloc.Truncate(a))
	}
	ev.Subsystem = ev.Env["SUBSYSTEM"]
	return ev, nil
}

// Relevant reports whether the event is from one of UeventSubsystems.
func (u Uevent) Relevant() bool { return slices.Contains(UeventSubsystems, u.Subsystem) }

// UeventListener receives kernel uevents from a NETLINK_KOBJECT_UEVENT
// socket and forwards the relevant ones.
type UeventListener struct {
	feed[Uevent]
	log *logrus.Entry
}

// ListenUevents opens the netlink socket. It fails where the process may
// not open one (some sandboxes). Outside the host's network namespace it
// opens but receives nothing, so callers keep inotify and a periodic
// resync as well.
func ListenUevents(log *logrus.Entry) (*UeventListener, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_KOBJECT_UEVENT)
	if err != nil {
		return nil, fmt.Errorf("open uevent netlink socket: %w", err)
	}
	// Bursts (a driver probing many devices) can be large; ask for a big
	// buffer, beyond rmem_max when permitted.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind uevent netlink socket: %w", err)
	}
	l := &UeventListener{
		feed: feed[Uevent]{file: os.NewFile(uintptr(fd), "uevent"), events: make(chan Uevent, eventBuffer), done: make(chan struct{})},
		log:  log,
	}
	go l.read()
	return l, nil
}

// Events delivers relevant uevents until Close; it is closed then. An
// overflow of the socket's queue is delivered as a Uevent with Action
// "overflow", since events were lost.
func (l *UeventListener) Events() <-chan Uevent { return l.events }

// Close stops listening and waits for the reader to end.
func (l *UeventListener) Close() error { return l.close() }

func (l *UeventListener) read() {
	defer close(l.done)
	defer close(l.events)
	rc, err := l.file.SyscallConn()
	if err != nil {
		l.log.WithError(err).Warn("uevent socket unusable")
		return
	}
	buf := make([]byte, 64<<10)
	for {
		var (
			n    int
			from unix.Sockaddr
			rerr error
		)
		err := rc.Read(func(fd uintptr) bool {
			n, from, rerr = unix.Recvfrom(int(fd), buf, 0)
			return rerr != unix.EAGAIN
		})
		if err != nil {
			if !l.closed.Load() {
				l.log.WithError(err).Warn("uevent read failed")
			}
			return
		}
		if errors.Is(rerr, unix.ENOBUFS) {
			l.send(Uevent{Action: "overflow"})
			continue
		}
		if rerr != nil {
			l.log.WithError(rerr).Warn("uevent receive failed")
			continue
		}
		// Only the kernel (port 0) sends kernel uevents.
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue
		}
		ev, err := ParseUevent(buf[:n])
		if err != nil {
			l.log.WithError(err).Debug("ignoring uevent")
			continue
		}
		if ev.Relevant() {
			l.send(ev)
		}
	}
}
