package harness

import "path/filepath"

// The kubelet's DRA directories move with its --root-dir (unlike the
// device-plugins dir, see Node.KubeletRoot): the harness's kubelet keeps
// them in its private root, so teardown removes them with it.

// PluginsRegistryDir is where the kubelet watches for plugin
// registration sockets (a DRA driver's among them).
func (n *Node) PluginsRegistryDir() string { return filepath.Join(n.KubeletRoot, "plugins_registry") }

// PluginsDir is the kubelet's plugins dir; a DRA driver keeps its socket
// and checkpoint in PluginsDir()/<driver>.
func (n *Node) PluginsDir() string { return filepath.Join(n.KubeletRoot, "plugins") }
