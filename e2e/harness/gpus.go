package harness

import (
	"fmt"

	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// IntelGPU returns fake Intel GPU n (i915): PCI 0000:00:0<2+n>.0 with
// /dev/dri/card<n> and /dev/dri/renderD<128+n>.
func IntelGPU(n int) drmtest.GPU {
	return drmtest.IntelIGPU.WithPCI(fmt.Sprintf("0000:00:%02x.0", 2+n)).WithNodes(n, 128+n)
}

// RenderPath is the container path of g's render node.
func RenderPath(g drmtest.GPU) string { return fmt.Sprintf("/dev/dri/renderD%d", g.Render) }

// CardPath is the container path of g's primary node.
func CardPath(g drmtest.GPU) string { return fmt.Sprintf("/dev/dri/card%d", g.Card) }

// AccelPath is the container path of accel device g's node.
func AccelPath(g drmtest.GPU) string { return fmt.Sprintf("/dev/accel/accel%d", g.Card) }
