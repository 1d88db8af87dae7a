// Package watch turns kernel notifications into "something changed"
// signals for the agent: inotify on directories (/dev/dri, the kubelet's
// device-plugins dir) and kernel uevents from a NETLINK_KOBJECT_UEVENT
// socket.
//
// # Semantics
//
// Consumers treat every event as a hint to look again, never as the new
// state: they rescan. So both sources may coalesce or drop events when the
// consumer lags, as long as one event stays pending, and a queue overflow
// becomes one more event.
//
// # Directories that come and go
//
// DirWatcher watches directories that may not exist yet or may be removed
// and re-created (/dev/dri appears when the first DRM driver loads; the
// kubelet's dir can be wiped). For a missing directory it watches the
// nearest existing parent and switches back to the directory as soon as it
// exists again, reporting that switch as an event.
//
// # Example
//
//	w, err := watch.NewDirWatcher(log, "/dev/dri", "/dev/dri/by-path")
//	if err != nil {
//		return err
//	}
//	defer w.Close()
//	for ev := range w.Events() {
//		rescan(ev)
//	}
package watch
