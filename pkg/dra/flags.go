package dra

import (
	"flag"

	"github.com/dri-cdi/dri-cdi/pkg/agent"
	"github.com/dri-cdi/dri-cdi/pkg/dmem"
	"github.com/dri-cdi/dri-cdi/pkg/flagenv"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
)

// NewFlagSet returns the command line of dri-cdi-dra: its flags write
// into o and log, with the defaults docs/dra-plugin.md lists, and each
// says its environment variable (flagenv.Prefix). Parsing errors are
// returned (flag.ContinueOnError).
func NewFlagSet(o *RunOptions, log *logging.Flags) *flag.FlagSet {
	fs := flag.NewFlagSet("dri-cdi-dra", flag.ContinueOnError)
	fs.StringVar(&o.NodeName, "node-name", "", "this node's name, the ResourceSlice pool (downward API spec.nodeName); required")
	fs.StringVar(&o.PodUID, "pod-uid", "", "this pod's UID (downward API metadata.uid); set, it enables rolling updates (kubelet >= 1.33)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (empty: in-cluster service account)")
	fs.StringVar(&o.PluginDataDir, "plugin-data-dir", DefaultPluginDataDir, "directory for dra.sock and the checkpoint; same path on the host")
	fs.StringVar(&o.RegistrarDir, "registrar-dir", DefaultRegistrarDir, "kubelet plugin registration directory; same path on the host")
	fs.StringVar(&o.PodResourcesSocket, "pod-resources-socket", podresources.DefaultSocket,
		"kubelet PodResources socket; with --usage, read once per scan to attribute each container's use of a card to its claims")
	fs.StringVar(&o.CgroupRoot, "cgroup-root", dmem.DefaultCgroupRoot,
		"the host's cgroup v2 mount, whose dmem.capacity gives the cards of pools with shares a memory capacity")
	agent.RegisterCardFlags(fs, &o.Agent, ":9472")
	log.Register(fs)
	flagenv.Usage(fs, flagenv.Prefix)
	return fs
}
