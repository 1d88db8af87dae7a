package cdi

import (
	"fmt"
	"strings"

	specs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// UnavailableEnv is the environment variable the spec of an unavailable
// card sets, to the card's ID, instead of device nodes. A container that
// was handed such a card's CDI name sees it, and dri-cdi-nri fails the
// container with an error naming the card.
const UnavailableEnv = "DRI_CDI_UNAVAILABLE"

// Unavailable returns c without any device node: the form of a card whose
// driver unbound or whose nodes are gone. DRM minors are handed out
// lowest-free, so the numbers such a card had may already belong to
// another card; Generate writes for it a spec that still defines the
// card's CDI name (a kubelet that reuses a checkpointed Allocate response
// resolves it again without asking the device plugin) but holds no device
// node, only UnavailableEnv=<card ID>. Such a card adds nothing to the
// AllDevice.
func Unavailable(c drm.Card) drm.Card {
	c.CardNode = drm.DeviceNode{}
	c.RenderNode = nil
	c.AccelNode = nil
	c.Extra = nil
	c.ByPath = nil
	return c
}

// IsUnavailable reports whether c has no device node at all, the form
// Unavailable gives.
func IsUnavailable(c *drm.Card) bool {
	return c.CardNode == (drm.DeviceNode{}) && c.RenderNode == nil && c.AccelNode == nil && len(c.Extra) == 0 && len(c.ByPath) == 0
}

// UnavailableCard returns the card ID of the UnavailableEnv entry in env
// ("KEY=VALUE" strings, as in an OCI process or a CDI spec), if any.
func UnavailableCard(env []string) (string, bool) {
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, UnavailableEnv+"="); ok {
			return v, true
		}
	}
	return "", false
}

// unavailableFile is the spec file of an unavailable card: its device
// holds only the UnavailableEnv marker. The CDI library rejects a device
// whose edits are empty ("invalid device, empty device edits"), and a
// runtime fails a container whose CDI names it cannot resolve; the marker
// keeps the name resolvable without handing over any device number.
func unavailableFile(kind, name, id string) (File, error) {
	return newFile(kind, name, id, specs.ContainerEdits{Env: []string{UnavailableEnv + "=" + id}})
}

// hasNodesOrMarker is the per-device rule of validateSpec: a device of
// ours carries device nodes, or is an unavailable card carrying exactly
// its UnavailableEnv marker and nothing else.
func hasNodesOrMarker(d *specs.Device) error {
	if len(d.ContainerEdits.DeviceNodes) > 0 {
		return nil
	}
	e := d.ContainerEdits
	if id, ok := UnavailableCard(e.Env); ok && id == d.Name && len(e.Env) == 1 {
		return nil
	}
	return fmt.Errorf("invalid CDI spec: device %q has no device nodes", d.Name)
}
