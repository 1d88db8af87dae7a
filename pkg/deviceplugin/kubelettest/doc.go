// Package kubelettest is a fake kubelet for device plugin tests: a real
// Registration gRPC server on kubelet.sock in a directory that behaves
// like the kubelet's device-plugins dir.
//
// On Register it does what kubelet v1.37 does: it checks the request,
// dials the plugin's socket, calls GetDevicePluginOptions and then keeps a
// ListAndWatch stream open, remembering the latest device list. Tests use
// Endpoint to read that list and to call Allocate and
// GetPreferredAllocation over the same connection. It keeps the kubelet's
// failures too (see Kubelet.Register): a socket path already connected is
// refused, and a failed attempt leaves its connection to the plugin open.
// SlowNext makes it answer after the plugin's deadline, having stored the
// registration anyway.
//
// Restart mimics a kubelet restart: the old process's connections close,
// it deletes every socket in the directory (or the whole directory) and
// serves kubelet.sock anew.
//
// Unix socket paths must stay under 108 bytes: put the directory in
// ShortDir (os.MkdirTemp("", "dc")), not t.TempDir().
package kubelettest
