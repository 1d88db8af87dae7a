package nri

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/nri/pkg/api"

	"github.com/dri-cdi/dri-cdi/pkg/kubeletcheckpoint"
)

// CheckpointAuthorizer tells which device IDs the kubelet's device manager
// allocated to a container, by resource name, keyed by the pod's UID.
// *kubeletcheckpoint.Reader satisfies it. An error wrapping
// kubeletcheckpoint.ErrNotAllocated means the kubelet allocated the
// container nothing; any other error means the source could not be read.
type CheckpointAuthorizer interface {
	ContainerDevices(ctx context.Context, podUID, container string) (map[string][]string, error)
}

// checkpointDevices answers for a container that PodResources does not
// report (notReported says why). The kubelet's PodResources API skips
// regular init containers, but the device manager allocated to them at pod
// admission and recorded it in its checkpoint before creating any
// container, keyed by the pod's UID. The UID is the PodSandbox's, which
// the kubelet sets: a pod author cannot choose it, so a copied allocation
// annotation (from another pod, or from the same pod's earlier
// incarnation, also through containerd's pod_annotations passthrough)
// matches no entry and is granted nothing. See docs/nri.md, "Init
// containers".
//
// Without a checkpoint source, or when the checkpoint records nothing for
// the container, it returns no allocation (the annotation stays a
// request only). A checkpoint that cannot be read is an error wrapping
// ErrUnconfirmed: the container asked for devices, and failing it lets the
// kubelet retry instead of starting it without them.
func (p *Plugin) checkpointDevices(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, notReported error) (map[string][]string, error) {
	log := p.entry(pod, ctr)
	if p.checkpoint == nil {
		log.WithError(notReported).Debug("the kubelet allocated nothing to this container")
		return nil, nil
	}
	uid := pod.GetUid()
	if uid == "" {
		return nil, fmt.Errorf("%w: %w, and the runtime passed no pod UID to look it up in the kubelet's device manager checkpoint",
			ErrUnconfirmed, notReported)
	}
	allocated, err := p.checkpoint.ContainerDevices(ctx, uid, ctr.GetName())
	switch {
	case errors.Is(err, kubeletcheckpoint.ErrNotAllocated):
		log.WithError(notReported).WithField("podUID", uid).Debug(
			"the kubelet allocated nothing to this container (neither PodResources nor the device manager checkpoint)")
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%w: %w; PodResources does not report regular init containers, and the device manager checkpoint "+
			"could not be read: %w (mount the kubelet's device-plugins dir read-only, see docs/nri.md)", ErrUnconfirmed, notReported, err)
	}
	log.WithField("podUID", uid).Debug("allocation confirmed by the kubelet's device manager checkpoint")
	return allocated, nil
}
