package nri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/pkg/podresources"
)

// Authorizer tells what the kubelet allocated to a container, device
// plugins and DRA claims together, with one question to the kubelet.
// *podresources.Client satisfies it. An error wrapping
// podresources.ErrPodNotFound or podresources.ErrContainerNotFound means
// the kubelet allocated the container nothing; any other error means the
// kubelet could not be asked.
type Authorizer interface {
	ContainerAllocation(ctx context.Context, namespace, pod, container string) (podresources.Allocation, error)
}

// Config is what a Plugin needs.
type Config struct {
	// Kind is our CDI kind, e.g. dri-cdi.dev/gpu.
	Kind string
	// Resources says which extended resources dri-cdi serves.
	Resources ResourceFilter
	// Authorizer asks the kubelet about allocations.
	Authorizer Authorizer
	// Checkpoint, when set, answers for containers the Authorizer does not
	// report (regular init containers), from the kubelet's device manager
	// checkpoint.
	Checkpoint CheckpointAuthorizer
	// Devices gives the nodes of a card.
	Devices DeviceSource
	// Metrics records what the plugin does; nil creates new ones.
	Metrics *Metrics
	// Log receives the plugin's log lines.
	Log *logrus.Entry
	// HostStat checks nodes against the host at request time; nil means
	// StatHost.
	HostStat HostStat
	// Memory, when set, tells the device memory of a container's shares
	// (the DRA checkpoint, NewDRACheckpoint), for which the plugin sets
	// dmem.max where the node enforces it; nil sets no memory limits.
	Memory MemorySource
	// MemoryPolicy says which pools require the limit; nil: none.
	MemoryPolicy MemoryPolicy
	// CgroupRoot is the host's cgroup v2 mount, read for dmem;
	// empty means dmem.DefaultCgroupRoot.
	CgroupRoot string
	// Owner, when set, also checks that the kernel registered each node's
	// numbers for the card (SysfsOwner); nil leaves that check out.
	Owner CharOwner
}

// Plugin is the dri-cdi NRI plugin. Its methods are the NRI stub's event
// handlers; Run connects it to the runtime.
type Plugin struct {
	kind       string
	served     ResourceFilter
	auth       Authorizer
	checkpoint CheckpointAuthorizer
	devices    DeviceSource
	metrics    *Metrics
	log        *logrus.Entry
	host       hostCheck
	memory     *memoryLimits

	connected atomic.Bool
	// synced, when set, is closed by the next Synchronize: Run uses it to
	// see a registration complete.
	synced atomic.Pointer[chan struct{}]
}

// New returns a plugin; every field of cfg but Metrics and Checkpoint is
// required.
func New(cfg Config) (*Plugin, error) {
	switch {
	case cfg.Kind == "" || !strings.Contains(cfg.Kind, "/"):
		return nil, fmt.Errorf("invalid CDI kind %q: want <vendor>/<class>", cfg.Kind)
	case cfg.Resources == nil:
		return nil, errors.New("no resource filter")
	case cfg.Authorizer == nil:
		return nil, errors.New("no authorizer")
	case cfg.Devices == nil:
		return nil, errors.New("no device source")
	case cfg.Log == nil:
		return nil, errors.New("no logger")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.HostStat == nil {
		cfg.HostStat = StatHost
	}
	return &Plugin{
		kind:       cfg.Kind,
		served:     cfg.Resources,
		auth:       cfg.Authorizer,
		checkpoint: cfg.Checkpoint,
		devices:    cfg.Devices,
		metrics:    cfg.Metrics,
		log:        cfg.Log,
		host:       hostCheck{stat: cfg.HostStat, owner: cfg.Owner},
		memory:     &memoryLimits{source: cfg.Memory, policy: cfg.MemoryPolicy, cgroupRoot: cfg.CgroupRoot},
	}, nil
}

// Connected reports whether the plugin is registered with the runtime and
// synchronized.
func (p *Plugin) Connected() bool { return p.connected.Load() }

// Metrics returns the plugin's metrics.
func (p *Plugin) Metrics() *Metrics { return p.metrics }

// Configure subscribes the plugin to CreateContainer, the only event it
// handles.
func (p *Plugin) Configure(_ context.Context, _, runtime, version string) (api.EventMask, error) {
	p.log.WithFields(logrus.Fields{"runtime": runtime, "runtimeVersion": version}).Info("configured by the runtime")
	var events api.EventMask
	events.Set(api.Event_CREATE_CONTAINER)
	return events, nil
}

// Synchronize completes the registration. The plugin keeps no state about
// existing containers, so it requests no updates.
func (p *Plugin) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	p.connected.Store(true)
	p.metrics.setConnected(true)
	if ch := p.synced.Swap(nil); ch != nil {
		close(*ch)
	}
	p.log.WithFields(logrus.Fields{"pods": len(pods), "containers": len(ctrs)}).Info("synchronized with the runtime")
	return nil, nil
}

// Shutdown notes that the runtime is shutting down.
func (p *Plugin) Shutdown(context.Context) {
	p.setDisconnected()
	p.log.Info("runtime is shutting down")
}

func (p *Plugin) setDisconnected() {
	p.connected.Store(false)
	p.metrics.setConnected(false)
}

// CreateContainer gives the container the nodes of the cards the kubelet
// allocated to it and it asked for (see the package doc). An error fails
// the container's creation; the kubelet retries it.
func (p *Plugin) CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	start := time.Now()
	p.metrics.containers.Inc()
	adj, result, err := p.handle(ctx, pod, ctr)
	p.metrics.observeHandler(result, time.Since(start))
	if err != nil {
		// The error crosses to the runtime as text: nothing in it may read
		// as a timeout of the plugin itself, which would disconnect it.
		return nil, nil, errors.New(err.Error())
	}
	return adj, nil, nil
}

func (p *Plugin) handle(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, string, error) {
	req, err := parseRequest(ctr, p.kind, p.served)
	if err != nil {
		return nil, resultError, p.fail(pod, ctr, reasonBadRequest, err)
	}
	if req.empty() {
		if mounts := driMounts(ctr); len(mounts) > 0 {
			p.metrics.misuse.Inc()
			p.entry(pod, ctr).WithField("mounts", mounts).Warn(
				"container bind-mounts /dev/dri or /dev/accel but requests no GPU resource: opening a DRM or accel node will fail with EPERM " +
					"(\"Operation not permitted\"), because a hostPath adds no device-cgroup allow rule; " +
					"remove the hostPath and request a dri-cdi GPU resource (e.g. dri-cdi.dev/<driver>, see the node's allocatable resources) in resources.limits")
		}
		return nil, resultNone, nil
	}

	log := p.entry(pod, ctr)
	start := time.Now()
	allocated, claims, err := p.allocation(ctx, pod, ctr)
	p.metrics.observePodResources(err, time.Since(start))
	switch {
	case errors.Is(err, podresources.ErrPodNotFound), errors.Is(err, podresources.ErrContainerNotFound):
		// Regular init containers are known only to the kubelet checkpoint.
		if allocated, err = p.checkpointDevices(ctx, pod, ctr, err); err != nil {
			return nil, resultError, p.fail(pod, ctr, reasonUnconfirmed, err)
		}
	case err != nil:
		return nil, resultError, p.fail(pod, ctr, reasonUnconfirmed, fmt.Errorf("%w: %w", ErrUnconfirmed, err))
	}

	dec, err := authorizeWithClaims(req, allocated, claimedCards(claims, p.kind), p.served)
	if err != nil {
		return nil, resultError, p.fail(pod, ctr, reasonNotAllocated, err)
	}
	if len(dec.denied) > 0 {
		p.metrics.denied.Inc()
		log.WithField("denied", dec.denied).Warn(
			"allocation annotation names devices the kubelet did not allocate to this container; they are not injected")
	}
	if len(dec.cards) == 0 {
		return nil, resultDenied, nil
	}

	checked, err := checkedNodes(ctx, dec.cards, processEnv(ctr), p.devices, p.host)
	if err != nil {
		return nil, resultError, p.fail(pod, ctr, identityReason(err), err)
	}
	if err := checkPresent(ctr, checked, p.host, p.devices); err != nil {
		return nil, resultError, p.fail(pod, ctr, reasonHostMismatch, err)
	}
	adj, added, err := deviceAdjustment(ctr, dec.cards, checked)
	if err != nil {
		reason := reasonUnknownCard
		if errors.Is(err, ErrDeviceConflict) {
			reason = reasonDeviceConflict
		}
		return nil, resultError, p.fail(pod, ctr, reason, err)
	}
	if len(added) == 0 {
		adj = nil
	}
	adj, reason, err := p.applyMemory(adj, log, ctr, claims, dec.cards)
	if err != nil {
		return nil, resultError, p.fail(pod, ctr, reason, err)
	}
	if len(added) == 0 {
		log.WithField("cards", dec.cards).Debug("allocated cards already present")
		return adj, resultVerified, nil
	}
	p.metrics.injected.Inc()
	p.metrics.nodes.Add(float64(len(added)))
	log.WithFields(logrus.Fields{"cards": dec.cards, "nodes": added}).Info("injected allocated device nodes")
	return adj, resultInjected, nil
}

// fail logs and counts a failed container and returns the error for the
// runtime, naming the pod and container.
func (p *Plugin) fail(pod *api.PodSandbox, ctr *api.Container, reason string, err error) error {
	p.metrics.errors.WithLabelValues(reason).Inc()
	err = fmt.Errorf("dri-cdi: container %q of pod %s/%s: %w", ctr.GetName(), pod.GetNamespace(), pod.GetName(), err)
	p.entry(pod, ctr).WithField("reason", reason).Error(err.Error())
	return err
}

func (p *Plugin) entry(pod *api.PodSandbox, ctr *api.Container) *logrus.Entry {
	return p.log.WithFields(logrus.Fields{
		"namespace": pod.GetNamespace(),
		"pod":       pod.GetName(),
		"container": ctr.GetName(),
		"id":        ctr.GetId(),
	})
}
