package dra

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dri-cdi/dri-cdi/pkg/agent"
	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
)

// usageClaimsTimeout bounds the usage scans' PodResources List: off every
// request path, a loaded kubelet may take its time.
const usageClaimsTimeout = 2 * time.Second

// RunOptions configure dri-cdi-dra.
type RunOptions struct {
	// Agent holds the discovery and spec loop's options (roots, CDI dir,
	// config, resync, metrics address, logger, version).
	Agent agent.Options
	// NodeName is this node (downward API spec.nodeName).
	NodeName string
	// PodUID enables rolling updates when set (downward API metadata.uid).
	PodUID string
	// Kubeconfig is a kubeconfig file; empty means the in-cluster config.
	Kubeconfig string
	// PluginDataDir and RegistrarDir default to the kubelet's
	// directories (NewDriver, which also checks the options).
	PluginDataDir, RegistrarDir string
	// PodResourcesSocket is the kubelet's PodResources socket, read with
	// --usage only: which claims each container holds its cards through.
	PodResourcesSocket string
	// CgroupRoot is the host's cgroup v2 mount (dmem.capacity).
	CgroupRoot string

	// API replaces the client built from Kubeconfig (tests).
	API API
	// OnDriver, when set, is given the driver once it exists (tests).
	OnDriver func(*Driver)
}

// Run is dri-cdi-dra: the agent's discovery, CDI spec and hotplug loop
// publishing to the DRA kubelet plugin instead of the device plugin.
func Run(ctx context.Context, o RunOptions) error {
	var trace *startTrace
	if o.Agent.Log != nil {
		trace = newStartTrace(o.Agent.Log.WithField("component", "dra"))
	}
	trace.mark("main")
	client := o.API
	if client == nil {
		var err error
		if client, err = newClient(o.Kubeconfig); err != nil {
			return err
		}
	}
	trace.mark("client")
	loop, err := agent.New(o.Agent)
	if err != nil {
		return err
	}
	cfg, a := loop.Config(), o.Agent
	var pr *podresources.Client
	if a.Usage.Enabled {
		if pr, err = podresources.New(o.PodResourcesSocket, podresources.WithTimeout(usageClaimsTimeout)); err != nil {
			return err
		}
		defer pr.Close()
	}
	d, err := NewDriver(Options{
		NodeName: o.NodeName, Kind: cfg.Kind(), SysfsRoot: a.Roots.Sysfs, CgroupRoot: o.CgroupRoot,
		PluginDataDir: o.PluginDataDir, RegistrarDir: o.RegistrarDir, PodUID: o.PodUID,
		API: client, Log: a.Log.WithField("component", "dra"), Metrics: NewMetrics(loop.Metrics().Registry),
		PodResources: pr,
	})
	if err != nil {
		return err
	}
	d.trace = trace
	if o.OnDriver != nil {
		o.OnDriver(d)
	}
	return loop.Run(ctx, d)
}

func newClient(kubeconfig string) (API, error) {
	var (
		cfg *rest.Config
		err error
	)
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config (kubeconfig %q): %w", kubeconfig, err)
	}
	cfg.UserAgent = "dri-cdi-dra"
	// Each NodePrepareResources GETs its claims, so the client's
	// rate limiter is on the prepare path: client-go's default of 5
	// requests/s would queue a burst of pods' claims behind each other and
	// the slice publisher's requests, and even 50/s (burst 100) added 20
	// ms to every prepare once a burst used up the bucket (the bench's 330
	// prepares in 5 s: median 18.8 ms). The limit is a guard against a
	// runaway loop, far above what pod starts on one node need; the API
	// server's priority and fairness protects it from the node.
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := draapi.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c, nil
}
